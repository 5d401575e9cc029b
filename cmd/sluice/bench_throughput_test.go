package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchThroughputUsageErrors(t *testing.T) {
	tests := []usageCase{
		{"bad flag", []string{"--nope"}, "sluice bench: unknown flag --nope\n"},
		{"stray argument", []string{"x"}, "sluice bench: unexpected argument \"x\"\n"},
		{"bad mode", []string{"--mode", "exact"}, "sluice bench: --mode: must be batched or strict, got \"exact\"\n"},
		{"bad transport", []string{"--transport", "http"}, "sluice bench: --transport: must be embedded, grpc, grpc-batch or grpc-noop, got \"http\"\n"},
		{"no nodes", []string{"--nodes", "0"}, "sluice bench: --nodes: must be in [1, 64] for an in-process cluster, got 0\n"},
		{"too many nodes", []string{"--nodes", "65"}, "sluice bench: --nodes: must be in [1, 64]"},
		{"no workers", []string{"--concurrency", "0"}, "sluice bench: --concurrency: must be in [1, 65536], got 0\n"},
		{"no keys", []string{"--keys", "0"}, "sluice bench: --keys: "},
		{"no duration", []string{"--duration", "0s"}, "sluice bench: --duration: must be > 0, got 0s\n"},
		{"negative warmup", []string{"--warmup", "-1s"}, "sluice bench: --warmup: "},
		{"no limit", []string{"--limit", "0"}, "sluice bench: --limit: must be ≥ 1, got 0\n"},
		{"limit too big", []string{"--limit", "1099511627777"}, "sluice bench: --limit: must be ≤ 2^40"},
		{"tiny window", []string{"--window", "0s"}, "sluice bench: --window: "},
		{"bad type", []string{"--type", "round"}, "sluice bench: --type: "},
		{"sync past window", []string{"--mode", "batched", "--sync", "1s"}, "sluice bench: --sync: must be -1 (strict) or ≥ 10ms"},
		{"sync in strict mode", []string{"--mode", "strict", "--sync", "100ms"}, "sluice bench: --sync: applies to --mode batched only"},
		{"not a duration", []string{"--duration", "10"}, "sluice bench: invalid value \"10\" for --duration"},
		{"batch without grpc-batch", []string{"--batch", "10"}, "sluice bench: --batch: applies to --transport grpc-batch only"},
		{"batch too big", []string{"--transport", "grpc-batch", "--batch", "1001"}, "sluice bench: --batch: must be in [1, 1000], got 1001\n"},
		{"zipf too flat", []string{"--zipf", "0.9"}, "sluice bench: --zipf: must be 0 (uniform) or in (1, 10]"},
		{"no hits", []string{"--hits", "0"}, "sluice bench: --hits: "},
		{"negative latency-every", []string{"--latency-every", "-1"}, "sluice bench: --latency-every: "},
		{"rule without target", []string{"--rule", "api"}, "sluice bench: --rule: applies to --target only"},
		{"target without rule", []string{"--target", "127.0.0.1:1"}, "sluice bench: --rule: name the rule the targets enforce\n"},
		{"target and nodes", []string{"--target", "127.0.0.1:1", "--rule", "api", "--nodes", "3"}, "sluice bench: --nodes: the running nodes of --target have their own\n"},
		{"target not host:port", []string{"--target", "here", "--rule", "api"}, "sluice bench: --target: \"here\" is not host:port"},
		{"target embedded", []string{"--target", "127.0.0.1:1", "--rule", "api", "--transport", "embedded"}, "sluice bench: --transport: must be grpc, grpc-batch or redis-lua against running nodes"},
	}
	checkUsageErrors(t, []string{"bench", "throughput"}, tests)
}

func TestBenchThroughputHelp(t *testing.T) {
	code, stdout, stderr := runCmd(context.Background(), "bench", "throughput", "-h")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"usage: sluice bench throughput", "-mode", "-transport", "-data-dir", "admits every check"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help does not mention %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCmd(context.Background(), "bench", "-h")
	if code != 0 || !strings.Contains(stdout, "  throughput ") {
		t.Errorf("`sluice bench -h` (exit %d) does not list throughput:\n%s", code, stdout)
	}
}

func TestBenchThroughputProfileNotWritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "cpu.prof")
	code, stdout, stderr := runCmd(context.Background(), "bench", "throughput", "--cpuprofile", path)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "--cpuprofile: ") || !strings.Contains(stderr, path) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and an error naming --cpuprofile and the path", code, stdout, stderr)
	}
}

// The JSON fields other tools read are there, and the text is one block.
func TestBenchThroughputOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for 2 × 1 s")
	}
	args := []string{"bench", "throughput", "--mode", "batched", "--nodes", "1", "--concurrency", "2",
		"--duration", "1s", "--warmup", "0s"}
	code, stdout, stderr := runCmd(context.Background(), append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
	}
	for _, k := range []string{"decisions_per_s", "p50_us", "p99_us", "p999_us", "mode", "nodes", "transport",
		"concurrency", "keys", "duration_s", "decisions", "errors", "admitted", "by_path"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON has no %q: %s", k, stdout)
		}
	}
	if v, _ := got["decisions_per_s"].(float64); v <= 0 {
		t.Errorf("decisions_per_s %v, want > 0", got["decisions_per_s"])
	}

	profile := filepath.Join(t.TempDir(), "cpu.prof")
	code, stdout, stderr = runCmd(context.Background(), append(args, "--cpuprofile", profile)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	// A pprof profile is gzipped protobuf.
	if b, err := os.ReadFile(profile); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("--cpuprofile wrote %d bytes (err %v), want a gzipped profile", len(b), err)
	}
	for _, want := range []string{"sluice bench throughput: batched, 1 node, embedded, 2 workers", "decisions", "p99.9", "paths        local"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout)
		}
	}
}
