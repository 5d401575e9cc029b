package main

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestBenchUsageErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"no subcommand", []string{"bench"}, 2, "", "sluice bench: missing subcommand; one of: accuracy, throughput\nrun 'sluice bench -h' for usage\n"},
		{"unknown subcommand", []string{"bench", "throughput!"}, 2, "", "sluice bench: unknown subcommand \"throughput!\"; one of: accuracy, throughput\n"},
		{"help", []string{"bench", "-h"}, 0, "usage: sluice bench SUBCOMMAND", ""},
		{"help via sluice help", []string{"help", "bench"}, 0, "  accuracy    run a `sluice sim` scenario", ""},
		{"accuracy help", []string{"bench", "accuracy", "-h"}, 0, "usage: sluice bench accuracy", ""},
		{"bad flag", []string{"bench", "accuracy", "--nope"}, 2, "", "sluice bench: flag provided but not defined: -nope\n"},
		{"stray argument", []string{"bench", "accuracy", "x"}, 2, "", "sluice bench: unexpected argument \"x\"\n"},
		{"bad type", []string{"bench", "accuracy", "--type", "round"}, 2, "", "sluice bench: --type: "},
		{"bad alloc", []string{"bench", "accuracy", "--alloc", "greedy"}, 2, "", "sluice bench: --alloc: "},
		{"bad split", []string{"bench", "accuracy", "--split", "skew:2"}, 2, "", "sluice bench: --split: "},
		{"sync past window", []string{"bench", "accuracy", "--sync", "2s"}, 2, "", "sluice bench: --sync: "},
		{"bad sync", []string{"bench", "accuracy", "--sync", "soon"}, 2, "", "sluice bench: invalid value \"soon\" for flag -sync: "},
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
// --json`, measured on a real cluster.
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
	gotKeys, wantKeys := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("bench JSON keys %v, want the simulator's %v", gotKeys, wantKeys)
	}
	if got["demand_total"] != want["demand_total"] {
		t.Errorf("demand_total %v, want the simulator's %v", got["demand_total"], want["demand_total"])
	}
	if w, ok := got["windows"].([]any); !ok || len(w) != 2 {
		t.Errorf("windows %v, want 2 of them", got["windows"])
	}
}
