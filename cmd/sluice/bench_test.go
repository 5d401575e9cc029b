package main

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/chaos/bench"
	"github.com/sluicehq/sluice/chaos/sim"
)

func TestBenchUsageErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"no subcommand", []string{"bench"}, 2, "", "sluice bench: missing subcommand; one of: accuracy, flood, memory, throughput\nrun 'sluice bench --help' for usage\n"},
		{"unknown subcommand", []string{"bench", "throughput!"}, 2, "", "sluice bench: unknown subcommand \"throughput!\"; did you mean \"throughput\"?\n"},
		{"far-off subcommand", []string{"bench", "latency"}, 2, "", "sluice bench: unknown subcommand \"latency\"; one of: accuracy, flood, memory, throughput\n"},
		{"help", []string{"bench", "-h"}, 0, "usage: sluice bench SUBCOMMAND", ""},
		{"help via sluice help", []string{"help", "bench"}, 0, "  accuracy    run a `sluice sim` scenario", ""},
		{"accuracy help", []string{"bench", "accuracy", "-h"}, 0, "usage: sluice bench accuracy", ""},
		{"bad flag", []string{"bench", "accuracy", "--nope"}, 2, "", "sluice bench: unknown flag --nope\n"},
		{"stray argument", []string{"bench", "accuracy", "x"}, 2, "", "sluice bench: unexpected argument \"x\"\n"},
		{"bad type", []string{"bench", "accuracy", "--type", "round"}, 2, "", "sluice bench: --type: "},
		{"bad alloc", []string{"bench", "accuracy", "--alloc", "greedy"}, 2, "", "sluice bench: --alloc: "},
		{"bad split", []string{"bench", "accuracy", "--split", "skew:2"}, 2, "", "sluice bench: --split: "},
		{"sync past window", []string{"bench", "accuracy", "--sync", "2s"}, 2, "", "sluice bench: --sync: "},
		{"bad sync", []string{"bench", "accuracy", "--sync", "soon"}, 2, "", "sluice bench: invalid value \"soon\" for --sync: "},
		{"no nodes", []string{"bench", "accuracy", "--nodes", "0"}, 2, "", "sluice bench: nodes must be in [1, 1024], got 0\n"},
		{"too many nodes", []string{"bench", "accuracy", "--nodes", "65"}, 2, "",
			"sluice bench: --nodes must be in [1, 64] for an in-process cluster, got 65\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if !strings.Contains(stdout, tt.wantStdout) || tt.wantStdout == "" && stdout != "" {
				t.Errorf("stdout %q, want it to contain %q", stdout, tt.wantStdout)
			}
			if !strings.HasPrefix(stderr, tt.wantStderr) || tt.wantStderr == "" && stderr != "" {
				t.Errorf("stderr %q, want it to start %q", stderr, tt.wantStderr)
			}
		})
	}
}

// `sluice bench accuracy --json` prints the same JSON object as `sluice sim
// --json`, measured on a real cluster, and what only a real cluster has:
// the decisions made outside the run, and what made them.
func TestBenchAccuracyJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster for 2 s")
	}
	flags := []string{"--duration", "2s", "--json"}
	code, stdout, stderr := runCmd(context.Background(), append([]string{"bench", "accuracy"}, flags...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, simOut, stderr := runCmd(context.Background(), append([]string{"sim"}, flags...)...)
	if code != 0 {
		t.Fatalf("sim: exit %d, stderr %q", code, stderr)
	}
	var got, want map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("bench output is not JSON: %v\n%s", err, stdout)
	}
	if err := json.Unmarshal([]byte(simOut), &want); err != nil {
		t.Fatal(err)
	}
	gotKeys := slices.Sorted(maps.Keys(got))
	wantKeys := slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(want)), "by_path", "decided_after_end", "decided_before_start", "outcome_unknown")))
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("bench JSON keys %v, want the simulator's and its own, %v", gotKeys, wantKeys)
	}
	if late, ok := got["decided_after_end"].(map[string]any); !ok || late["decided"] == nil || late["admitted"] == nil {
		t.Errorf("decided_after_end %v, want how many were decided and admitted", got["decided_after_end"])
	}
	if got["demand_total"] != want["demand_total"] {
		t.Errorf("demand_total %v, want the simulator's %v", got["demand_total"], want["demand_total"])
	}
	if w, ok := got["windows"].([]any); !ok || len(w) != 2 {
		t.Errorf("windows %v, want 2 of them", got["windows"])
	}
}

// The text report says how many requests were decided outside the run,
// and by what.
func TestOutsideRunText(t *testing.T) {
	tests := []struct {
		name string
		res  bench.AccuracyResult
		want string
	}{
		{"none", bench.AccuracyResult{Result: &sim.Result{DemandTotal: 1800}, ByPath: map[string]int64{"local": 1800}},
			"decided after the run's end: none of the 1800 requests\ndecided by: local 1800\n"},
		{"late and early", bench.AccuracyResult{Result: &sim.Result{DemandTotal: 1800},
			DecidedAfterEnd:    bench.OutsideRun{Decided: 172, Admitted: 170, FurthestS: 0.5638},
			DecidedBeforeStart: bench.OutsideRun{Decided: 1, Admitted: 1, FurthestS: 0.001},
			ByPath:             map[string]int64{"strict": 1799, "fail-local": 1}},
			"decided after the run's end: 172 of the 1800 requests (170 admitted), the furthest 0.564s after it;" +
				" each counts in the window it was decided in, which the table does not show\n" +
				"decided before the run's start: 1 of the 1800 requests (1 admitted), the furthest 0.001s before it;" +
				" each counts in the window it was decided in, which the table does not show\n" +
				"decided by: fail-local 1, strict 1799\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := outsideRunText(&tt.res); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
