package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/chaos/bench"
	"github.com/sluicehq/sluice/window"
)

// runBenchThroughput is `sluice bench throughput [flags]`: decisions per
// second and per-call latency of a real in-process cluster.
func runBenchThroughput(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d := bench.ThroughputDefaults()
	fs := flag.NewFlagSet("bench throughput", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sluice bench throughput [flags]\n\n"+
			"Starts N nodes in this process (memberlist, gRPC and, in strict mode, Raft over loopback) with\n"+
			"one rule, and has --concurrency workers issue checks back to back, each one at a time, worker\n"+
			"i on node i mod N, keys drawn uniformly from --keys. After --warmup it measures for --duration:\n"+
			"decisions per second and the latency of each call (p50, p99, p99.9).\n\n"+
			"The default --limit (2^40, the largest count) admits every check: the run measures the\n"+
			"decision path, not refusals. Lower it to measure a limited workload.\n\nflags:")
		printFlags(fs)
	}
	mode := fs.String("mode", d.Mode, "batched (decide from the node's view, sync every --sync) or strict (every check through the Raft log)")
	nodes := fs.Int("nodes", d.Nodes, "in-process cluster size; 1 runs one node without gossip")
	transport := fs.String("transport", d.Transport, "embedded (call Node.Allow), grpc (call Limiter.Check; one client connection per node), grpc-batch (Limiter.CheckBatch of --batch checks), grpc-noop (a method of Check's shape on the same servers that decides nothing: what gRPC alone costs) or redis-lua (with --target: a sliding window of --limit per --window kept by a Lua script in the Redis at --target, one EVALSHA a check, one connection a worker)")
	batch := fs.Int("batch", d.Batch, "checks per CheckBatch call (--transport grpc-batch)")
	zipf := fs.Float64("zipf", 0, "draw keys by Zipf's law of this exponent (> 1; key 0 the hottest) instead of uniformly")
	hits := fs.Int64("hits", d.Hits, "hits each check spends")
	latencyEvery := fs.Int("latency-every", 0, "time one call in `N` (0: every gRPC call, one embedded call in 64)")
	concurrency := fs.Int("concurrency", d.Concurrency, "workers, spread round-robin over the nodes")
	keys := fs.Int("keys", d.Keys, "distinct keys, drawn uniformly at random by each worker")
	duration := fs.Duration("duration", d.Duration, "measured stretch")
	warmup := fs.Duration("warmup", d.Warmup, "load before measuring, not measured")
	limit := fs.Int64("limit", d.Limit, "the rule's count per window; the default admits everything")
	win := fs.Duration("window", d.Window, "the rule's window length")
	typ := fs.String("type", d.Type.String(), "window type: fixed or sliding")
	syncEvery := fs.Duration("sync", d.Sync, "sync interval of the batched rule (batched mode only)")
	dataDir := fs.String("data-dir", "", "keep each node's state in a fresh subdirectory of this `DIR`, on disk (strict: durable Raft log); removed after the run. Default: in memory")
	seed := fs.Uint64("seed", d.Seed, "seed for the workers' key choices")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (warmup included) to this `FILE`, for go tool pprof")
	memProfile := fs.String("memprofile", "", "write a heap profile (allocations over the whole run) to this `FILE` when the run ends, for go tool pprof")
	targets := fs.String("target", "", "measure running nodes instead: their gRPC `HOST:PORT,...` (plaintext), checked under --rule; --transport grpc (the default then) or grpc-batch")
	rule := fs.String("rule", "", "with --target: the rule the targets enforce, checked on --keys keys named k:0, k:1, …")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *mode == bench.ModeStrict && setFlags(fs)["sync"] && *targets == "" {
		return usageError{errors.New("--sync: applies to --mode batched only; a strict rule decides through the Raft log")}
	}
	set := setFlags(fs)
	if *targets == "" && set["rule"] {
		return usageError{errors.New("--rule: applies to --target only; an in-process run checks a rule of its own")}
	}
	if *targets != "" {
		theirs := []string{"mode", "nodes", "limit", "window", "type", "sync", "data-dir"}
		if *transport == bench.TransportRedisLua {
			// The script counts the run's limit per the run's window.
			theirs = []string{"mode", "nodes", "sync", "data-dir"}
		}
		for _, f := range theirs {
			if set[f] {
				return usageError{fmt.Errorf("--%s: the running nodes of --target have their own", f)}
			}
		}
		if !set["transport"] {
			*transport = bench.TransportGRPC
		}
	}
	if *transport != bench.TransportGRPCBatch && set["batch"] {
		return usageError{errors.New("--batch: applies to --transport grpc-batch only")}
	}
	c := bench.ThroughputConfig{
		Mode: *mode, Nodes: *nodes, Transport: *transport, Batch: *batch, Zipf: *zipf, Hits: *hits,
		LatencyEvery: *latencyEvery, Concurrency: *concurrency, Keys: *keys,
		Duration: *duration, Warmup: *warmup, Limit: *limit, Window: *win, Sync: *syncEvery,
		DataDir: *dataDir, Seed: *seed,
		NodeLogger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		TargetRule: *rule,
	}
	if *targets != "" {
		c.Targets = strings.Split(*targets, ",")
	}
	var err error
	if c.Type, err = window.ParseType(*typ); err != nil {
		return usageError{fmt.Errorf("--type: %w", err)}
	}
	if err := c.Validate(); err != nil {
		return usageError{fmt.Errorf("--%w", err)}
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *memProfile != "" {
		write, err := startMemProfile(*memProfile)
		if err != nil {
			return err
		}
		defer write()
	}
	stop := showProgress(stderr, "bench throughput", c.Warmup+c.Duration, *asJSON)
	res, err := bench.Throughput(ctx, c)
	stop()
	if res == nil {
		return err
	}
	// A stopped run still reports what it measured, then fails.
	if asJSONErr := writeThroughput(stdout, res, *asJSON); asJSONErr != nil {
		return asJSONErr
	}
	if err == nil && res.Decisions == 0 && res.Errors > 0 {
		return fmt.Errorf("every check failed (%d); the first: %s", res.Errors, res.FirstError)
	}
	return err
}

// writeThroughput writes res as one JSON object or one block of text.
func writeThroughput(w io.Writer, r *bench.ThroughputResult, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	var b strings.Builder
	switch {
	case r.Transport == bench.TransportRedisLua:
		fmt.Fprintf(&b, "sluice bench throughput: redis-lua at %s, %d per %gs sliding, %d worker%s, %s keys",
			r.Targets[0], r.Limit, r.WindowS, r.Concurrency, tputPlural(r.Concurrency), tputThousands(int64(r.Keys)))
	case len(r.Targets) > 0:
		fmt.Fprintf(&b, "sluice bench throughput: rule %s on %s, %s, %d worker%s, %s keys",
			r.Rule, strings.Join(r.Targets, ", "), r.Transport, r.Concurrency, tputPlural(r.Concurrency), tputThousands(int64(r.Keys)))
	default:
		fmt.Fprintf(&b, "sluice bench throughput: %s, %d node%s, %s, %d worker%s, %s keys, %s window",
			r.Mode, r.Nodes, tputPlural(r.Nodes), r.Transport, r.Concurrency, tputPlural(r.Concurrency),
			tputThousands(int64(r.Keys)), r.Type)
	}
	if r.Batch > 0 {
		fmt.Fprintf(&b, ", %d checks a call", r.Batch)
	}
	if r.Zipf > 0 {
		fmt.Fprintf(&b, ", zipf %g", r.Zipf)
	}
	if r.Hits != 1 {
		fmt.Fprintf(&b, ", %d hits a check", r.Hits)
	}
	if r.Mode == bench.ModeBatched {
		fmt.Fprintf(&b, ", sync %gs", r.SyncS)
	}
	if r.Durable {
		b.WriteString(", on disk")
	}
	fmt.Fprintf(&b, "\n  measured     %gs after %gs warm-up, GOMAXPROCS %d\n", r.DurationS, r.WarmupS, r.GOMAXPROCS)
	fmt.Fprintf(&b, "  decisions    %s (%s/s), admitted %s, errors %s",
		tputThousands(r.Decisions), tputThousands(int64(r.DecisionsPerS+0.5)), tputThousands(r.Admitted), tputThousands(r.Errors))
	if r.Unknown > 0 {
		fmt.Fprintf(&b, " (%s of unknown outcome)", tputThousands(r.Unknown))
	}
	b.WriteString("\n")
	if r.FirstError != "" {
		fmt.Fprintf(&b, "  first error  %s\n", r.FirstError)
	}
	fmt.Fprintf(&b, "  latency µs   p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s, min %s)",
		tputMicros(r.P50US), tputMicros(r.P90US), tputMicros(r.P99US), tputMicros(r.P999US), tputMicros(r.MaxUS), tputMicros(r.MeanUS), tputMicros(r.MinUS))
	if r.LatencyEvery > 1 {
		fmt.Fprintf(&b, ", one call in %d timed", r.LatencyEvery)
	}
	b.WriteString("\n")
	if r.CPUSPerMillion > 0 {
		whose := "the whole process"
		if len(r.Targets) > 0 {
			whose = "this process, the clients alone"
		}
		fmt.Fprintf(&b, "  cpu          %.3f s per million decisions, %.2f allocations per decision (%s)\n",
			r.CPUSPerMillion, r.AllocsPerDecision, whose)
	}
	if len(r.ByPath) > 0 {
		var parts []string
		for _, p := range slices.Sorted(maps.Keys(r.ByPath)) {
			parts = append(parts, p+" "+tputThousands(r.ByPath[p]))
		}
		fmt.Fprintf(&b, "  paths        %s\n", strings.Join(parts, ", "))
	}
	switch {
	case len(r.Targets) > 0:
		// The targets' counters are theirs: see their /metrics.
	case r.Mode == bench.ModeStrict:
		fmt.Fprintf(&b, "  raft         %s entries (%s/s), %.1f checks per entry, %s failovers\n",
			tputThousands(r.StrictEntries), tputThousands(int64(r.EntriesPerS+0.5)), r.ChecksPerEntry, tputThousands(r.Failovers))
	default:
		fmt.Fprintf(&b, "  sync         %s deltas sent, %s bytes/s per node\n", tputThousands(r.SyncDeltas), tputThousands(int64(r.SyncBytesPerS+0.5)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func tputPlural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// tputMicros formats a latency in microseconds with three significant digits
// at least, e.g. 0.412, 41.2, 4123.
func tputMicros(us float64) string {
	switch {
	case us < 10:
		return fmt.Sprintf("%.3f", us)
	case us < 100:
		return fmt.Sprintf("%.2f", us)
	case us < 1000:
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.0f", us)
}

// tputThousands formats n with commas between groups of three digits.
func tputThousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
