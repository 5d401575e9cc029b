package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/chaos/bench"
)

func TestBenchMemoryUsageErrors(t *testing.T) {
	tests := []usageCase{
		{"bad flag", []string{"--nope"}, "sluice bench: unknown flag --nope\n"},
		{"stray argument", []string{"x"}, "sluice bench: unexpected argument \"x\"\n"},
		{"no nodes", []string{"--nodes", "0"}, "sluice bench: --nodes: must be in [1, 256], got 0\n"},
		{"too many nodes", []string{"--nodes", "257"}, "sluice bench: --nodes: must be in [1, 256]"},
		{"no keys", []string{"--keys", "0"}, "sluice bench: --keys: "},
		{"too many keys", []string{"--keys", "10000001"}, "sluice bench: --keys: "},
		{"not a number", []string{"--keys", "many"}, "sluice bench: invalid value \"many\" for --keys"},
		{"bad type", []string{"--type", "round"}, "sluice bench: --type: "},
		{"sync past window", []string{"--rule-window", "1s", "--sync", "2s"}, "sluice bench: --sync: "},
		{"strict sync", []string{"--sync", "-1ns"}, "sluice bench: --sync: must be > 0"},
		{"no window", []string{"--rule-window", "0s"}, "sluice bench: --rule-window: "},
		{"bad window", []string{"--rule-window", "60"}, "sluice bench: invalid value \"60\" for --rule-window"},
		{"bad max heap", []string{"--max-heap", "lots"}, "sluice bench: --max-heap: want a size such as 8GiB"},
		{"negative max heap", []string{"--max-heap", "-1GiB"}, "sluice bench: --max-heap: "},
		{"tiny max heap", []string{"--max-heap", "1KiB"}, "sluice bench: --max-heap: must be at least 1 MiB"},
		{"huge max heap", []string{"--max-heap", "1e30TB"}, "sluice bench: --max-heap: "},
	}
	checkUsageErrors(t, []string{"bench", "memory"}, tests)
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"1000000", 1_000_000},
		{"8GiB", 8 << 30},
		{"512MiB", 512 << 20},
		{"1.5GB", 1_500_000_000},
		{"64 KiB", 64 << 10},
		{"2TiB", 2 << 40},
		{"300B", 300},
	}
	for _, tt := range tests {
		if got, err := parseBytes(tt.in); err != nil || got != tt.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "GiB", "8XB", "-5", "NaN", "Inf"} {
		if got, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", bad, got)
		}
	}
}

func TestBenchMemoryHelp(t *testing.T) {
	code, stdout, stderr := runCmd(context.Background(), "bench", "memory", "-h")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"usage: sluice bench memory", "-nodes", "-keys", "-max-heap", "-rule-window", "-sync", "-type", "-json"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help does not mention %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCmd(context.Background(), "bench", "-h")
	if code != 0 || !strings.Contains(stdout, "  memory ") {
		t.Errorf("`sluice bench -h` (exit %d) does not list memory:\n%s", code, stdout)
	}
}

// A small real run: the JSON fields other tools read, a plausible figure,
// and the text in one block.
func TestBenchMemoryOutput(t *testing.T) {
	args := []string{"bench", "memory", "--nodes", "3", "--keys", "2000"}
	code, stdout, stderr := runCmd(context.Background(), append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
	}
	for _, k := range []string{"nodes", "keys", "keys_measured", "bytes_per_key", "heap_bytes", "rule", "max_heap_bytes", "sync_rounds"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON has no %q: %s", k, stdout)
		}
	}
	if n, _ := got["nodes"].(float64); n != 3 {
		t.Errorf("nodes %v, want 3", got["nodes"])
	}
	if k, _ := got["keys_measured"].(float64); k != 2000 {
		t.Errorf("keys_measured %v, want 2000", got["keys_measured"])
	}
	if b, _ := got["bytes_per_key"].(float64); b < 50 || b > 100_000 {
		t.Errorf("bytes_per_key %v, want within [50, 100000]", got["bytes_per_key"])
	}
	rule, _ := got["rule"].(map[string]any)
	if rule["type"] != "sliding" || rule["allocation"] != "owner" || rule["window_s"] != 60.0 || rule["sync_s"] != 0.1 {
		t.Errorf("rule %v, want 60 s sliding, sync 0.1 s, owner", got["rule"])
	}

	code, stdout, stderr = runCmd(context.Background(), append(args, "--type", "fixed", "--max-heap", "512MiB")...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"sluice bench memory: 3 nodes, 2,000 keys", "fixed", "bytes per active key per node", "for 3 nodes × 2,000 keys"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "NOT MEASURED") {
		t.Errorf("2,000 keys on 3 nodes fit in 512 MiB, yet:\n%s", stdout)
	}
}

// A run cut to fit --max-heap says so plainly, with what the whole would
// have needed.
func TestBenchMemoryTextSaysWhenCapped(t *testing.T) {
	r := &bench.MemoryResult{Nodes: 64, Keys: 100_000, KeysMeasured: 15_000, BytesPerKey: 8_512.4,
		HeapBytes: 8_171_904_000, ProjectedHeapBytes: 54_479_360_000, SampleKeys: 1000, MaxHeapBytes: 8 << 30,
		Rule:     bench.MemoryRule{Name: "bench", Count: 1000, WindowS: 60, Type: "sliding", SyncS: 0.1, Allocation: "owner"},
		Admitted: 960_000, Rounds: 7, Quiescent: true, Deltas: 24_192, EntriesDelivered: 302_400_000}
	var b strings.Builder
	if err := writeMemory(&b, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"NOT MEASURED AT 100,000 KEYS", "about 50.7 GiB of heap (projected from 1,000 keys)", "over --max-heap 8.0 GiB",
		"measured at 15,000 keys", "8,512 bytes per active key per node", "for 64 nodes × 15,000 keys",
		"7 rounds until none was left to send",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := writeMemory(&b, r, true); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil || got["keys_measured"] != 15_000.0 || got["keys"] != 100_000.0 {
		t.Errorf("JSON %s (err %v), want keys 100000 and keys_measured 15000", b.String(), err)
	}
}
