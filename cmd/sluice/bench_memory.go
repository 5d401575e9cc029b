package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/chaos/bench"
	"github.com/sluicehq/sluice/window"
)

// runBenchMemory is `sluice bench memory [flags]`: the heap per active key
// per node of a fleet whose every node is active on every key.
func runBenchMemory(ctx context.Context, args []string, stdout, _ io.Writer) error {
	d := bench.MemoryDefaults()
	fs := flag.NewFlagSet("bench memory", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sluice bench memory [flags]\n\n"+
			"Builds N nodes' views (counter replicas, no network) sharing one batched rule (owner\n"+
			"allocation unless --alloc says otherwise), has every node check every one of K keys once, then delivers every sync delta\n"+
			"each node sends to the node it is for, round after round in virtual time, until none is\n"+
			"left to send. It reports the live heap the views hold, after garbage collection, per key per\n"+
			"node: the worst case, every node active on every key.\n\n"+
			"It first measures a sample of keys and projects the heap for K; when that exceeds --max-heap\n"+
			"it measures the most keys that fit instead, and says so.\n\nflags:")
		printFlags(fs)
	}
	nodes := fs.Int("nodes", d.Nodes, fmt.Sprintf("nodes sharing the rule, 1 … %d", bench.MaxMemoryNodes))
	keys := fs.Int("keys", d.Keys, "`K` distinct keys, every one checked by every node")
	win := fs.Duration("rule-window", d.Window, "the rule's window length")
	typ := fs.String("type", d.Type.String(), "window type: fixed or sliding")
	syncEvery := fs.Duration("sync", d.Sync, "the rule's sync interval")
	alloc := fs.String("alloc", d.Alloc.String(), "allocation policy: owner, adaptive or classic")
	maxHeap := fs.String("max-heap", "8GiB", "most heap to build, a `SIZE` such as 512MiB, 8GiB or a number of bytes; K is cut to fit")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	c := bench.MemoryConfig{Nodes: *nodes, Keys: *keys, Window: *win, Sync: *syncEvery}
	var err error
	if c.Type, err = window.ParseType(*typ); err != nil {
		return usageError{fmt.Errorf("--type: %w", err)}
	}
	if c.Alloc, err = window.ParseAllocation(*alloc); err != nil {
		return usageError{fmt.Errorf("--alloc: %w", err)}
	}
	if c.MaxHeap, err = parseBytes(*maxHeap); err != nil {
		return usageError{fmt.Errorf("--max-heap: %w", err)}
	}
	if err := c.Validate(); err != nil {
		return usageError{fmt.Errorf("--%w", err)}
	}
	// The collector's headroom would let the heap reach about twice what
	// is live; a soft limit a half above the budget keeps the process near
	// what --max-heap says, at the cost of more frequent collections.
	if soft := c.MaxHeap + c.MaxHeap/2 + int64(runtimeHeap()); soft < debug.SetMemoryLimit(-1) {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(soft))
	}
	res, err := bench.Memory(ctx, c)
	if err != nil {
		return err
	}
	return writeMemory(stdout, res, *asJSON)
}

// runtimeHeap returns the bytes of heap objects the process holds now.
func runtimeHeap() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// parseBytes reads a size: a number of bytes, or a number with a unit
// (KiB, MiB, GiB, TiB or KB, MB, GB, TB), e.g. "8GiB" or "1.5GB".
func parseBytes(s string) (int64, error) {
	// Longest suffixes first, so that "GiB" is not read as "B".
	units := []struct {
		suffix string
		factor float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	num, factor := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, factor = strings.TrimSpace(n), u.factor
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*factor >= math.MaxInt64 {
		return 0, fmt.Errorf("want a size such as 8GiB, 512MiB or 1000000, got %q", s)
	}
	return int64(v * factor), nil
}

// writeMemory writes r as one JSON object or one block of text.
func writeMemory(w io.Writer, r *bench.MemoryResult, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sluice bench memory: %d node%s, %s keys, %d per %gs %s, sync %gs, %s allocation\n",
		r.Nodes, tputPlural(r.Nodes), tputThousands(int64(r.Keys)), r.Rule.Count, r.Rule.WindowS, r.Rule.Type,
		r.Rule.SyncS, r.Rule.Allocation)
	if r.Capped() {
		fmt.Fprintf(&b, "  NOT MEASURED AT %s KEYS: they would need about %s of heap (projected from %s keys),\n"+
			"  over --max-heap %s; measured at %s keys, the most that fit.\n",
			tputThousands(int64(r.Keys)), memBytes(float64(r.ProjectedHeapBytes)), tputThousands(int64(r.SampleKeys)),
			memBytes(float64(r.MaxHeapBytes)), tputThousands(int64(r.KeysMeasured)))
	}
	fmt.Fprintf(&b, "  per key      %s bytes per active key per node\n", tputThousands(int64(math.Round(r.BytesPerKey))))
	fmt.Fprintf(&b, "  heap         %s for %d node%s × %s keys",
		memBytes(float64(r.HeapBytes)), r.Nodes, tputPlural(r.Nodes), tputThousands(int64(r.KeysMeasured)))
	if !r.Capped() && r.ProjectedHeapBytes > 0 {
		fmt.Fprintf(&b, " (projected %s from %s keys)", memBytes(float64(r.ProjectedHeapBytes)), tputThousands(int64(r.SampleKeys)))
	}
	fmt.Fprintf(&b, "\n  checks       %s of %s admitted\n",
		tputThousands(r.Admitted), tputThousands(int64(r.Nodes)*int64(r.KeysMeasured)))
	state := "until none was left to send"
	if !r.Quiescent {
		state = "and deltas were still due after the last"
	}
	fmt.Fprintf(&b, "  sync         %d round%s %s: %s deltas carrying %s entries, merged\n",
		r.Rounds, tputPlural(r.Rounds), state, tputThousands(r.Deltas), tputThousands(r.EntriesDelivered))
	_, err := io.WriteString(w, b.String())
	return err
}

// memBytes formats a byte count with a binary unit, e.g. 8.0 GiB.
func memBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(n) >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
