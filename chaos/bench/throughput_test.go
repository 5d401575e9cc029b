package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// The histogram is exact below 1,024 ns, and elsewhere answers within one
// bucket, 1/512 of the value, of the exact quantile.
func TestLatencyHistQuantiles(t *testing.T) {
	var h latencyHist
	if got := h.quantile(0.5); got != 0 {
		t.Errorf("empty histogram p50 %d, want 0", got)
	}
	for v := int64(1); v <= 1000; v++ {
		h.record(v)
	}
	for _, q := range []struct {
		q    float64
		want int64
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0.0001, 1}} {
		if got := h.quantile(q.q); got != q.want {
			t.Errorf("quantile(%v) = %d, want exactly %d", q.q, got, q.want)
		}
	}

	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]int64, 100_000)
	var parts [4]latencyHist // recorded apart, merged: as the workers do
	for i := range vals {
		// Log-uniform from 100 ns to about 1 s.
		vals[i] = int64(100 * float64(uint64(1)<<rng.IntN(24)) * (1 + rng.Float64()))
		parts[i%len(parts)].record(vals[i])
	}
	var m latencyHist
	for i := range parts {
		m.merge(&parts[i])
	}
	slices.Sort(vals)
	if m.count != int64(len(vals)) || m.min != vals[0] || m.max != vals[len(vals)-1] {
		t.Fatalf("merged count %d min %d max %d, want %d %d %d", m.count, m.min, m.max, len(vals), vals[0], vals[len(vals)-1])
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := m.quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/512+1 {
			t.Errorf("quantile(%v) = %d, want within 1/512 above the exact %d", q, got, exact)
		}
	}

	// Every bucket's range starts where the previous one ended, and every
	// value maps into the bucket whose range holds it.
	next := int64(0)
	for i := range histBuckets {
		lo, w := histRange(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		for _, v := range []int64{lo, lo + w - 1} {
			if i < histBuckets-1 && histIndex(v) != i {
				t.Fatalf("value %d maps to bucket %d, want %d", v, histIndex(v), i)
			}
		}
		next = lo + w
	}
	if lo, w := histRange(histIndex(999_999)); w > 1024 || lo+w <= 999_999 {
		t.Errorf("bucket of 999,999 ns is [%d, +%d), want ~1 µs wide", lo, w)
	}
}

func TestThroughputConfigErrors(t *testing.T) {
	tests := []struct {
		edit func(*ThroughputConfig)
		want string
	}{
		{func(c *ThroughputConfig) { c.Mode = "exact" }, "mode: "},
		{func(c *ThroughputConfig) { c.Nodes = 0 }, "nodes: "},
		{func(c *ThroughputConfig) { c.Nodes = MaxNodes + 1 }, "nodes: "},
		{func(c *ThroughputConfig) { c.Transport = "http" }, "transport: "},
		{func(c *ThroughputConfig) { c.Concurrency = 0 }, "concurrency: "},
		{func(c *ThroughputConfig) { c.Keys = 0 }, "keys: "},
		{func(c *ThroughputConfig) { c.Duration = 0 }, "duration: "},
		{func(c *ThroughputConfig) { c.Warmup = -time.Second }, "warmup: "},
		{func(c *ThroughputConfig) { c.StrictTimeout = -time.Second }, "strict-timeout: "},
		{func(c *ThroughputConfig) { c.Limit = 0 }, "limit: "},
		{func(c *ThroughputConfig) { c.Window = 0 }, "window: "},
		{func(c *ThroughputConfig) { c.Mode, c.Sync = ModeBatched, 2*time.Second }, "sync: "},
		{func(c *ThroughputConfig) { c.Transport, c.Batch = TransportGRPCBatch, 0 }, "batch: "},
		{func(c *ThroughputConfig) { c.Transport, c.Batch = TransportGRPCBatch, 1001 }, "batch: "},
		{func(c *ThroughputConfig) { c.Zipf = 0.5 }, "zipf: "},
		{func(c *ThroughputConfig) { c.Zipf = 11 }, "zipf: "},
		{func(c *ThroughputConfig) { c.Hits = 0 }, "hits: "},
		{func(c *ThroughputConfig) { c.Limit, c.Hits = 5, 6 }, "hits: "},
		{func(c *ThroughputConfig) { c.LatencyEvery = -1 }, "latency-every: "},
	}
	for _, tt := range tests {
		c := ThroughputDefaults()
		tt.edit(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Validate() = %v, want an error starting %q", err, tt.want)
		}
		if _, err := Throughput(context.Background(), c); err == nil {
			t.Errorf("Throughput ran an invalid config (%s…)", tt.want)
		}
	}
	c := ThroughputDefaults()
	c.Mode = ModeStrict
	c.Sync = 0 // ignored in strict mode
	if err := c.Validate(); err != nil {
		t.Errorf("strict config with no sync interval: %v", err)
	}
}

// shortRun is a 2-second run of 8 embedded workers. However slow the
// machine, a strict check waits for the log rather than fail over.
func shortRun(mode string, nodes int) ThroughputConfig {
	c := ThroughputDefaults()
	c.Mode, c.Nodes, c.Concurrency = mode, nodes, 8
	c.Duration, c.Warmup = 2*time.Second, 200*time.Millisecond
	c.StrictTimeout = patience
	c.NodeLogger = testLogger()
	return c
}

// checkResult checks what every successful run must show.
func checkResult(t *testing.T, c ThroughputConfig, res *ThroughputResult) {
	t.Helper()
	t.Logf("%s %d nodes %s c=%d: %.0f decisions/s, p50 %.1f µs, p99 %.1f µs, p99.9 %.1f µs, %.1f checks/entry",
		res.Mode, res.Nodes, res.Transport, res.Concurrency, res.DecisionsPerS, res.P50US, res.P99US, res.P999US, res.ChecksPerEntry)
	if res.DecisionsPerS <= 0 || res.Decisions <= 0 {
		t.Errorf("%d decisions, %v/s; want some", res.Decisions, res.DecisionsPerS)
	}
	// A strict leader starved of CPU past its lease (a loaded machine)
	// steps down, and the checks it was committing end with their outcome
	// unknown: honest answers, not failures, as long as they are those of
	// a leadership change or two. Any other error is a failure.
	if res.Errors != res.Unknown || res.Unknown > 2*int64(c.Concurrency) {
		t.Errorf("%d errors (%d of unknown outcome), first %q; want none but the unknown outcomes of a leadership change or two",
			res.Errors, res.Unknown, res.FirstError)
	}
	switch {
	case c.Transport == TransportGRPCNoop && res.Admitted != 0:
		t.Errorf("the no-op reference admitted %d of %d: it decides nothing", res.Admitted, res.Decisions)
	case c.Transport != TransportGRPCNoop && res.Admitted != res.Decisions:
		t.Errorf("admitted %d of %d under a limit nothing reaches", res.Admitted, res.Decisions)
	}
	if want := res.Calls * int64(max(res.Batch, 1)); res.Decisions != want {
		t.Errorf("%d decisions in %d calls of %d checks, want %d", res.Decisions, res.Calls, max(res.Batch, 1), want)
	}
	if res.CPUSPerMillion <= 0 {
		t.Errorf("cpu_s_per_million %v, want the process's CPU time per million decisions", res.CPUSPerMillion)
	}
	if !(0 < res.MinUS && res.MinUS <= res.P50US && res.P50US <= res.P90US && res.P90US <= res.P99US &&
		res.P99US <= res.P999US && res.P999US <= res.MaxUS) {
		t.Errorf("latencies not ordered: min %v p50 %v p90 %v p99 %v p99.9 %v max %v",
			res.MinUS, res.P50US, res.P90US, res.P99US, res.P999US, res.MaxUS)
	}
	if res.MeanUS < res.MinUS || res.MeanUS > res.MaxUS {
		t.Errorf("mean %v outside [min %v, max %v]", res.MeanUS, res.MinUS, res.MaxUS)
	}
	if res.DurationS != c.Duration.Seconds() || res.Mode != c.Mode || res.Nodes != c.Nodes ||
		res.Concurrency != c.Concurrency || res.Keys != c.Keys || res.Transport != c.Transport {
		t.Errorf("result describes %+v, want the config's run", res)
	}
	if res.Mode == ModeStrict && (res.StrictEntries <= 0 || res.ChecksPerEntry < 1) {
		t.Errorf("strict run committed %d entries of %.2f checks; want some, ≥ 1 check each", res.StrictEntries, res.ChecksPerEntry)
	}
	if res.Failovers != 0 {
		t.Errorf("%d strict checks failed over", res.Failovers)
	}
}

func TestThroughputEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs in-process clusters for 2 s each")
	}
	for _, mode := range []string{ModeBatched, ModeStrict} {
		for _, nodes := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d", mode, nodes), func(t *testing.T) {
				c := shortRun(mode, nodes)
				res, err := Throughput(context.Background(), c)
				if err != nil {
					t.Fatal(err)
				}
				checkResult(t, c, res)
				wantPath := window.PathLocal
				if mode == ModeStrict {
					wantPath = window.PathStrict
				}
				if len(res.ByPath) != 1 || res.ByPath[wantPath.String()] != res.Decisions {
					t.Errorf("by path %v, want all %d decisions %v", res.ByPath, res.Decisions, wantPath)
				}
				// A batched decision on keys the node holds allocates
				// nothing; what the run allocates besides (timers, the
				// nodes' rounds) is far below one in a hundred decisions.
				if mode == ModeBatched && nodes == 1 && res.AllocsPerDecision >= 0.01 {
					t.Errorf("%.3f allocations per decision, want none", res.AllocsPerDecision)
				}
			})
		}
	}
}

func TestThroughputGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster for 2 s")
	}
	c := shortRun(ModeStrict, 3)
	c.Transport = TransportGRPC
	res, err := Throughput(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, c, res)
	if res.ByPath != nil {
		t.Errorf("by path %v over gRPC, which does not carry the path", res.ByPath)
	}
}

// The no-op reference and CheckBatch run on the same servers as Check: a
// batch call decides each of its checks, the reference decides none.
func TestThroughputGRPCReferenceAndBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for 2 s per transport")
	}
	for _, tr := range []string{TransportGRPCNoop, TransportGRPCBatch} {
		t.Run(tr, func(t *testing.T) {
			c := shortRun(ModeBatched, 1)
			c.Transport, c.Batch = tr, 10
			res, err := Throughput(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, c, res)
			if tr == TransportGRPCBatch && res.Batch != 10 || tr != TransportGRPCBatch && res.Batch != 0 {
				t.Errorf("result says %d checks a call, want %d", res.Batch, c.Batch)
			}
		})
	}
}

// Each check spends Hits: with a count of 30 and 3 hits a check on one key,
// exactly 10 checks are admitted in the run's one window.
func TestThroughputHits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for 1 s")
	}
	c := shortRun(ModeBatched, 1)
	c.Keys, c.Hits, c.Limit, c.Window, c.Type = 1, 3, 30, time.Hour, window.Fixed
	c.Duration, c.Warmup = time.Second, 0
	res, err := Throughput(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Admitted != 10 || res.Decisions <= 10 || res.Hits != 3 {
		t.Errorf("admitted %d of %d checks of %d hits under a count of 30, want 10", res.Admitted, res.Decisions, res.Hits)
	}
}

// A Zipf picker draws the first keys far more often than the last; the
// uniform one draws them alike.
func TestKeyPicker(t *testing.T) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint(i)
	}
	for _, tc := range []struct {
		s        float64
		hot, low int // bounds on draws of key 0, and of the 500 last together
	}{{1.5, 3000, 0}, {0, 0, 4000}} {
		pick := keyPicker(keys, tc.s, rand.New(rand.NewPCG(1, 2)))
		n := map[string]int{}
		for range 10_000 {
			n[pick()]++
		}
		last := 0
		for _, k := range keys[500:] {
			last += n[k]
		}
		switch {
		case tc.s > 1 && (n["0"] < tc.hot || last > n["0"]/10):
			t.Errorf("zipf %g: key 0 drawn %d times, the last 500 keys %d; want key 0 hot", tc.s, n["0"], last)
		case tc.s == 0 && (n["0"] > 50 || last < tc.low):
			t.Errorf("uniform: key 0 drawn %d times, the last 500 keys %d; want about 10 and 5,000", n["0"], last)
		}
	}
}

// A run against running nodes checks their rule over gRPC, and reports
// them as its nodes.
func TestThroughputTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 nodes for 1 s")
	}
	rules := []window.Rule{{Name: "login", Count: window.MaxCount, Window: time.Minute, Type: window.Fixed, SyncInterval: 100 * time.Millisecond}}
	cl, err := StartCluster(context.Background(), 2, rules, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	for _, tr := range []string{TransportGRPC, TransportGRPCBatch} {
		t.Run(tr, func(t *testing.T) {
			c := ThroughputDefaults()
			c.Targets, c.TargetRule = []string{cl.Nodes[0].GRPCAddr(), cl.Nodes[1].GRPCAddr()}, "login"
			c.Transport, c.Batch, c.Concurrency, c.Duration, c.Warmup = tr, 10, 4, time.Second, 100*time.Millisecond
			res, err := Throughput(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Decisions <= 0 || res.Errors != 0 || res.Admitted != res.Decisions || res.Nodes != 2 || res.Rule != "login" || res.Mode != "" {
				t.Errorf("against 2 running nodes: %d decisions, %d admitted, %d errors (%s), nodes %d, rule %q, mode %q",
					res.Decisions, res.Admitted, res.Errors, res.FirstError, res.Nodes, res.Rule, res.Mode)
			}
			if want := res.Calls * int64(max(res.Batch, 1)); res.Decisions != want {
				t.Errorf("%d decisions in %d calls of %d checks", res.Decisions, res.Calls, max(res.Batch, 1))
			}
		})
	}
	c := ThroughputDefaults()
	c.Targets, c.TargetRule = []string{"no-port"}, "login"
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "target: ") {
		t.Errorf("a target without a port: %v, want an error naming target", err)
	}
	c.Targets, c.TargetRule, c.Transport = []string{"127.0.0.1:1"}, "login", TransportEmbedded
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "transport: ") {
		t.Errorf("embedded against running nodes: %v, want an error naming transport", err)
	}
}

// A durable run keeps its state in a fresh subdirectory of DataDir, which it
// removes afterwards.
func TestThroughputDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node on disk for 1 s")
	}
	c := shortRun(ModeStrict, 1)
	c.Duration = time.Second
	c.DataDir = t.TempDir()
	res, err := Throughput(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, c, res)
	if !res.Durable {
		t.Error("result does not say the run was durable")
	}
	left, err := os.ReadDir(c.DataDir)
	if err != nil || len(left) != 0 {
		t.Errorf("data dir holds %v after the run (%v), want nothing", left, err)
	}
}

// A run stopped by its context reports what it measured and the context's
// error.
func TestThroughputStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for 1 s")
	}
	c := shortRun(ModeBatched, 1)
	c.Duration, c.Warmup = time.Hour, 0
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	called := time.Now()
	res, err := Throughput(ctx, c)
	took := time.Since(called)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
	// What it measured lies within the call, however long the machine
	// took to notice the deadline.
	if res == nil || res.Decisions == 0 || res.DurationS <= 0 || res.DurationS > took.Seconds() {
		t.Fatalf("result %+v, want some decisions in the %v the call took", res, took)
	}
}

// BenchmarkThroughputStrict is the strict run `sluice bench throughput`
// measures by default (3 nodes, 64 embedded workers, 10,000 keys), for 5 s
// per iteration; run it with -benchtime=1x -cpuprofile to see where a
// strict decision's time goes.
func BenchmarkThroughputStrict(b *testing.B) {
	c := ThroughputDefaults()
	c.Duration = 5 * time.Second
	for b.Loop() {
		res, err := Throughput(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.DecisionsPerS, "decisions/s")
		b.ReportMetric(res.P99US, "p99-µs")
		b.ReportMetric(res.ChecksPerEntry, "checks/entry")
	}
}
