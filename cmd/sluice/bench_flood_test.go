package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBenchFloodUsageErrors(t *testing.T) {
	tests := []usageCase{
		{"no keys", []string{"--keys", "0"}, "sluice bench: --keys must be ≥ 1, got 0\n"},
		{"empty batch", []string{"--batch", "0"}, "sluice bench: --batch must be in [1, 1000], got 0\n"},
		{"batch past the node's bound", []string{"--batch", "1001"}, "sluice bench: --batch must be in [1, 1000], got 1001\n"},
		{"short keys", []string{"--key-size", "10"}, "sluice bench: --key-size must be in [24, 1024], got 10\n"},
		{"long keys", []string{"--key-size", "1025"}, "sluice bench: --key-size must be in [24, 1024], got 1025\n"},
		{"no workers", []string{"--concurrency", "0"}, "sluice bench: --concurrency must be in [1, 1024], got 0\n"},
		{"no sample", []string{"--sample", "0s"}, "sluice bench: --sample must be positive, got 0s\n"},
		{"negative watch", []string{"--watch", "-1s"}, "sluice bench: --watch must be ≥ 0, got -1s\n"},
		{"metrics not over http", []string{"--metrics-url", "127.0.0.1:8070/metrics"},
			"sluice bench: --metrics-url must be an http:// or https:// URL, got \"127.0.0.1:8070/metrics\"\n"},
		{"bad target", []string{"--target", "nowhere"}, "sluice bench: --target must be HOST:PORT"},
		{"stray argument", []string{"x"}, "sluice bench: unexpected argument \"x\"\n"},
	}
	checkUsageErrors(t, []string{"bench", "flood"}, tests)
}

// TestBenchFlood floods an agent that holds at most 1,000 keys with 5,000
// and reads its memory as it goes: every key is sent and admitted, the
// node holds no more than its bound and says it evicted the rest.
func TestBenchFlood(t *testing.T) {
	config := writeFile(t, "sluice.yaml", agentTestConfig+"max_keys: 1000\n")
	a := startTestAgentArgs(t, nil, "--config", config, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	code, stdout, stderr := runCmd(ctx, "bench", "flood", "--target", a.GRPCAddr(), "--rule", "fixed", "--keys", "5000",
		"--batch", "100", "--key-size", "32", "--concurrency", "3", "--pid", strconv.Itoa(os.Getpid()),
		"--metrics-url", "http://"+a.HTTPAddr()+"/metrics", "--sample", "50ms", "--watch", "200ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var res floodResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
	}
	if res.Sent != 5000 || res.Admitted != 5000 || res.Errors != 0 || res.KeysPerSec <= 0 {
		t.Fatalf("sent %d, admitted %d, errors %d at %.0f keys/s; want 5000 sent and admitted", res.Sent, res.Admitted,
			res.Errors, res.KeysPerSec)
	}
	if len(res.Samples) < 2 || res.Samples[0].Phase != "before" || res.Samples[len(res.Samples)-1].Phase != "after" {
		t.Fatalf("samples %+v, want one before the flood and one after", res.Samples)
	}
	for _, s := range res.Samples {
		if s.Error != "" || s.RSS <= 0 || s.HeapInUse <= 0 || s.Keys < 0 || s.Keys > 1000 {
			t.Fatalf("sample %+v: want RSS, heap and at most 1000 keys read", s)
		}
	}
	// The clock may pass a window's end in the run: a sweep then drops
	// keys, but none that the bound evicted.
	if last := res.Samples[len(res.Samples)-1]; last.Evicted != 4000 {
		t.Fatalf("the node evicted %d keys, want 4000 of 5000 past its 1000", last.Evicted)
	}

	// In text, a line a sample and the summary.
	code, stdout, stderr = runCmd(ctx, "bench", "flood", "--target", a.GRPCAddr(), "--rule", "fixed", "--keys", "300",
		"--pid", strconv.Itoa(os.Getpid()), "--sample", "50ms", "--watch", "100ms")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"sluice bench flood: 300 keys of 64 bytes to " + a.GRPCAddr() + ", rule fixed (window 10s)",
		"before  rss ", "sent 300 keys in ", "rss: before "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	code, _, stderr = runCmd(ctx, "bench", "flood", "--target", a.GRPCAddr(), "--rule", "fixd", "--keys", "1")
	if code != 2 || stderr != "sluice bench: --rule: the node has no rule \"fixd\"; did you mean \"fixed\"?\n" {
		t.Errorf("an unknown rule: exit %d, stderr %q", code, stderr)
	}
}

// TestMemReleaser: the agent gives memory back once its node holds a good
// many fewer keys than at its last peak, and not before.
func TestMemReleaser(t *testing.T) {
	reads := []int{0, 500_000, 450_000, 100_000, 50_000, 300_000, 250_000, 0}
	drained := make(chan struct{})
	var at []int // the read after which each release came
	i := 0
	keys := func() int {
		if i == len(reads) {
			select {
			case <-drained:
			default:
				close(drained)
			}
			return reads[len(reads)-1]
		}
		i++
		return reads[i-1]
	}
	m := startMemReleaser(keys, func() { at = append(at, i-1) }, time.Millisecond)
	select {
	case <-drained:
	case <-time.After(patience):
		t.Fatal("the releaser stopped reading the keys")
	}
	m.Stop()
	// 500,000 to 100,000: released; from 100,000 to 50,000, too few;
	// from 300,000 to 250,000 too few, to 0 released.
	if want := []int{3, 7}; len(at) != len(want) || at[0] != want[0] || at[1] != want[1] {
		t.Fatalf("released after reads %v, want %v", at, want)
	}
}
