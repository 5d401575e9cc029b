package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/cluster"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

const benchFloodUsage = `usage: sluice bench flood [--target HOST:PORT] [--rule RULE] [--keys N] [--batch N] [--key-size BYTES]
                          [--concurrency N] [--pid PID] [--metrics-url URL] [--sample DURATION] [--watch DURATION]
                          [--json] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME]

Sends a running node --keys distinct keys as fast as it takes them: CheckBatch requests of --batch
checks of one hit each under --rule, from --concurrency workers, every key --key-size bytes and
never sent before (each run draws its own prefix). It reports the keys per second the node took.

With --pid (the agent's process id, on this machine) it reads the agent's resident memory (VmRSS
of /proc/PID/status), and with --metrics-url (its /metrics) the keys it holds, the keys it evicted
and its Go heap, every --sample: once before the flood, through it, and until --watch after it
(default: two of the rule's windows, by when every key the flood brought has expired, and two
samples more). Each sample is a line; the summary gives the memory before, at its peak and at the
end.

flags:
`

// runBenchFlood is `sluice bench flood [flags]`: a flood of distinct keys
// sent to a running node, and what the node's memory does through it.
func runBenchFlood(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench flood", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchFloodUsage)
		printFlags(fs)
	}
	target := fs.String("target", defaultGRPCAddr, "gRPC address of the node, `HOST:PORT`")
	tf := addTLSFlagsFor(fs, "--target")
	rule := fs.String("rule", "api", "the `RULE` the keys are checked under")
	keys := fs.Int("keys", 1_000_000, "distinct keys to send")
	batch := fs.Int("batch", 100, fmt.Sprintf("checks a CheckBatch carries, 1 … %d", cluster.MaxBatchChecks))
	keySize := fs.Int("key-size", 64, fmt.Sprintf("`BYTES` a key takes, %d … 1024", minFloodKey))
	concurrency := fs.Int("concurrency", 4, "CheckBatch calls in flight at once")
	pid := fs.Int("pid", 0, "the agent's process id, `PID`, whose VmRSS to sample (default: none)")
	metricsURL := fs.String("metrics-url", "", "the agent's /metrics `URL` to sample, http://HOST:PORT/metrics (default: none)")
	sample := fs.Duration("sample", 5*time.Second, "time between two samples")
	watch := fs.Duration("watch", 0, "how long to sample after the flood (default: two of the rule's windows and two --sample)")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on one CheckBatch after this long")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *keys < 1:
		return usageError{fmt.Errorf("--keys must be ≥ 1, got %d", *keys)}
	case *batch < 1 || *batch > cluster.MaxBatchChecks:
		return usageError{fmt.Errorf("--batch must be in [1, %d], got %d", cluster.MaxBatchChecks, *batch)}
	case *keySize < minFloodKey || *keySize > 1024:
		return usageError{fmt.Errorf("--key-size must be in [%d, 1024], got %d", minFloodKey, *keySize)}
	case *concurrency < 1 || *concurrency > 1024:
		return usageError{fmt.Errorf("--concurrency must be in [1, 1024], got %d", *concurrency)}
	case *pid < 0:
		return usageError{fmt.Errorf("--pid must be a process id, got %d", *pid)}
	case *sample <= 0:
		return usageError{fmt.Errorf("--sample must be positive, got %v", *sample)}
	case *watch < 0:
		return usageError{fmt.Errorf("--watch must be ≥ 0, got %v", *watch)}
	case *timeout <= 0:
		return usageError{fmt.Errorf("--timeout must be positive, got %v", *timeout)}
	}
	if *metricsURL != "" && !strings.HasPrefix(*metricsURL, "http://") && !strings.HasPrefix(*metricsURL, "https://") {
		return usageError{fmt.Errorf("--metrics-url must be an http:// or https:// URL, got %q", *metricsURL)}
	}
	if err := cluster.CheckHostPort("--target", *target); err != nil {
		return usageError{err}
	}
	conn, err := dialNode(*target, tf)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := sluicev1.NewLimiterClient(conn)
	win, err := ruleWindow(ctx, client, *target, *rule, *timeout)
	if err != nil {
		return err
	}
	if !setFlags(fs)["watch"] {
		*watch = 2*win + 2**sample
	}
	prefix, err := floodPrefix()
	if err != nil {
		return err
	}
	f := &flood{client: client, target: *target, rule: *rule, keys: *keys, batch: *batch, keySize: *keySize,
		prefix: prefix, concurrency: *concurrency, timeout: *timeout}
	m := &memWatch{pid: *pid, metricsURL: *metricsURL, every: *sample}
	if !*asJSON {
		m.out = stdout
		fmt.Fprintf(stdout, "sluice bench flood: %d keys of %d bytes to %s, rule %s (window %v), %d a batch, %d at once\n",
			f.keys, f.keySize, f.target, f.rule, win, f.batch, f.concurrency)
	}
	res, err := runFlood(ctx, f, m, *watch)
	if res == nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(res); jerr != nil {
			return jerr
		}
		return err
	}
	res.write(stdout)
	return err
}

// minFloodKey is the shortest key the flood sends: its prefix, which tells
// one run's keys from another's, and the key's number.
const minFloodKey = 24

// ruleWindow returns the window of the node's rule named rule.
func ruleWindow(ctx context.Context, client sluicev1.LimiterClient, target, rule string, timeout time.Duration) (time.Duration, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := client.Rules(cctx, &sluicev1.RulesRequest{})
	if err != nil {
		return 0, callError(target, "the rules request", timeout, err)
	}
	var names []string
	for _, r := range resp.GetRules() {
		if r.GetName() == rule {
			return r.GetWindow().AsDuration(), nil
		}
		names = append(names, r.GetName())
	}
	if s, ok := suggest(rule, names); ok {
		return 0, fmt.Errorf("--rule: the node has no rule %q; did you mean %q?", rule, s)
	}
	return 0, fmt.Errorf("--rule: the node has no rule %q; it has %s", rule, strings.Join(names, ", "))
}

// floodPrefix is what every key of a run starts with: a random id, so that
// a second run's keys are new to the node too.
func floodPrefix() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "flood-" + hex.EncodeToString(b[:]) + "-", nil
}

// flood is what to send, and where.
type flood struct {
	client      sluicev1.LimiterClient
	target      string
	rule        string
	keys        int
	batch       int
	keySize     int
	prefix      string
	concurrency int
	timeout     time.Duration
}

// key is the flood's i-th key: its prefix, then i with leading zeros, to
// keySize bytes.
func (f *flood) key(i int) string {
	return f.prefix + fmt.Sprintf("%0*d", f.keySize-len(f.prefix), i)
}

// floodResult is what a flood sent and what the node's memory did.
type floodResult struct {
	Target      string  `json:"target"`
	Rule        string  `json:"rule"`
	Keys        int     `json:"keys"`
	KeySize     int     `json:"key_size"`
	Batch       int     `json:"batch"`
	Concurrency int     `json:"concurrency"`
	Sent        int64   `json:"sent"`
	Admitted    int64   `json:"admitted"`
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	Seconds     float64 `json:"flood_s"`
	KeysPerSec  float64 `json:"keys_per_s"`
	// Samples are the node's memory through the run.
	Samples []memSample `json:"samples,omitempty"`
}

// runFlood sends the flood, with m sampling from before it until watch
// after it. A flood cut short by ctx reports what it sent, with ctx's
// error; one whose every batch failed, the first failure alone.
func runFlood(ctx context.Context, f *flood, m *memWatch, watch time.Duration) (*floodResult, error) {
	res := &floodResult{Target: f.target, Rule: f.rule, Keys: f.keys, KeySize: f.keySize, Batch: f.batch, Concurrency: f.concurrency}
	sampling := m.pid != 0 || m.metricsURL != ""
	mctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	if sampling {
		m.start = time.Now()
		m.take(ctx, "before")
		wg.Go(func() { m.run(mctx) })
	}
	start := time.Now()
	var next, sent, admitted, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	batches := int64((f.keys + f.batch - 1) / f.batch)
	var workers sync.WaitGroup
	for range f.concurrency {
		workers.Go(func() {
			req := &sluicev1.CheckBatchRequest{}
			for ctx.Err() == nil {
				b := next.Add(1) - 1
				if b >= batches {
					return
				}
				lo, hi := int(b)*f.batch, min(int(b+1)*f.batch, f.keys)
				req.Checks = req.Checks[:0]
				for i := lo; i < hi; i++ {
					req.Checks = append(req.Checks, &sluicev1.CheckRequest{Rule: f.rule, Key: f.key(i), Hits: 1})
				}
				cctx, cancel := context.WithTimeout(ctx, f.timeout)
				resp, err := f.client.CheckBatch(cctx, req)
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					failed.Add(int64(hi - lo))
					err = callError(f.target, "a batch", f.timeout, err)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				sent.Add(int64(hi - lo))
				for _, r := range resp.GetResults() {
					if r.GetAllowed() {
						admitted.Add(1)
					}
				}
			}
		})
	}
	workers.Wait()
	took := time.Since(start)
	if sampling {
		m.setPhase("after")
		if ctx.Err() == nil {
			t := time.NewTimer(watch)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		stop()
		wg.Wait()
		m.take(context.Background(), "after")
	}
	res.Sent, res.Admitted, res.Errors = sent.Load(), admitted.Load(), failed.Load()
	res.Seconds = took.Seconds()
	res.KeysPerSec = float64(res.Sent) / took.Seconds()
	res.Samples = m.samples
	if p := firstErr.Load(); p != nil {
		res.FirstError = (*p).Error()
		if res.Sent == 0 {
			return nil, *p
		}
	}
	return res, ctx.Err()
}

// write prints the flood's summary.
func (r *floodResult) write(w io.Writer) {
	fmt.Fprintf(w, "sent %d keys in %.1f s: %.0f keys/s, %d admitted, %d in failed batches\n",
		r.Sent, r.Seconds, r.KeysPerSec, r.Admitted, r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first failure: %s\n", r.FirstError)
	}
	if len(r.Samples) == 0 {
		return
	}
	before, last := r.Samples[0], r.Samples[len(r.Samples)-1]
	peak, heap, maxKeys := before, before.HeapInUse, before.Keys
	for _, s := range r.Samples {
		if s.RSS > peak.RSS {
			peak = s
		}
		heap, maxKeys = max(heap, s.HeapInUse), max(maxKeys, s.Keys)
	}
	if before.RSS > 0 {
		fmt.Fprintf(w, "rss: before %s, peak %s (at %.0f s), after %s (%.0f s after the flood)\n",
			mib(before.RSS), mib(peak.RSS), peak.At, mib(last.RSS), last.At-r.Seconds-before.At)
	}
	if last.Keys >= 0 {
		fmt.Fprintf(w, "keys: at most %d held, %d at the end; %d evicted\n", maxKeys, last.Keys, last.Evicted-before.Evicted)
		fmt.Fprintf(w, "heap: at most %s in use, %s at the end; idle %s, of which released to the system %s\n",
			mib(heap), mib(last.HeapInUse), mib(last.HeapIdle), mib(last.HeapReleased))
	}
}

// mib writes bytes in MiB.
func mib(b int64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// memWatch samples a node's memory: its process's RSS, and what its
// /metrics say.
type memWatch struct {
	pid        int
	metricsURL string
	every      time.Duration
	out        io.Writer // each sample as a line, or nil

	start   time.Time
	mu      sync.Mutex
	phase   string
	samples []memSample
}

// memSample is one reading of a node's memory; -1 for what was not read.
type memSample struct {
	At           float64 `json:"at_s"` // since the first sample
	Phase        string  `json:"phase"`
	RSS          int64   `json:"rss_bytes"`
	Keys         int64   `json:"keys"`
	Evicted      int64   `json:"evicted"`
	HeapInUse    int64   `json:"heap_inuse_bytes"`
	HeapIdle     int64   `json:"heap_idle_bytes"`
	HeapReleased int64   `json:"heap_released_bytes"`
	Error        string  `json:"error,omitempty"`
}

func (m *memWatch) setPhase(p string) {
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
}

// run takes a sample every m.every until ctx ends; the first, in the
// flood. A sample under way when ctx ends is finished.
func (m *memWatch) run(ctx context.Context) {
	m.setPhase("flood")
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.mu.Lock()
			phase := m.phase
			m.mu.Unlock()
			m.take(context.Background(), phase)
		}
	}
}

// take reads and records one sample.
func (m *memWatch) take(ctx context.Context, phase string) {
	s := memSample{At: time.Since(m.start).Seconds(), Phase: phase, RSS: -1, Keys: -1, Evicted: -1,
		HeapInUse: -1, HeapIdle: -1, HeapReleased: -1}
	var errs []error
	if m.pid != 0 {
		rss, err := readRSS(m.pid)
		if err != nil {
			errs = append(errs, err)
		}
		s.RSS = rss
	}
	if m.metricsURL != "" {
		if err := scrapeMemory(ctx, m.metricsURL, &s); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.Error = oneLine(err.Error())
	}
	m.mu.Lock()
	m.samples = append(m.samples, s)
	m.mu.Unlock()
	if m.out != nil {
		line := fmt.Sprintf("%6.0fs %-6s  rss %s  keys %d  evicted %d  heap in use %s  idle %s  released %s",
			s.At, s.Phase, mib(s.RSS), s.Keys, s.Evicted, mib(s.HeapInUse), mib(s.HeapIdle), mib(s.HeapReleased))
		if s.Error != "" {
			line += "  (" + s.Error + ")"
		}
		fmt.Fprintln(m.out, line)
	}
}

// readRSS reads the resident set size of process pid, in bytes, from
// /proc/PID/status.
func readRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1, fmt.Errorf("--pid %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1, fmt.Errorf("--pid %d: VmRSS %q: %w", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return -1, fmt.Errorf("--pid %d: %w", pid, err)
	}
	return -1, fmt.Errorf("--pid %d: no VmRSS in /proc/%d/status", pid, pid)
}

// scrapeMemory reads from a node's /metrics the keys it holds and evicted
// (its rules' sums) and its Go heap into s.
func scrapeMemory(ctx context.Context, url string, s *memSample) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("--metrics-url: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("--metrics-url: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("--metrics-url: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("--metrics-url: %w", err)
	}
	sum := func(name string) int64 {
		mf, ok := mfs[name]
		if !ok {
			return -1
		}
		var v float64
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				v += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v += m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				v += m.GetUntyped().GetValue()
			}
		}
		return int64(v)
	}
	s.Keys, s.Evicted = sum("sluice_keys"), sum("sluice_keys_evicted_total")
	s.HeapInUse, s.HeapIdle, s.HeapReleased = sum("go_memstats_heap_inuse_bytes"), sum("go_memstats_heap_idle_bytes"),
		sum("go_memstats_heap_released_bytes")
	return nil
}
