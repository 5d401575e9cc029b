package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer the agent's goroutines may log into while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// agentTestEpoch is a 10s window boundary; the tests' clock stands 2s past it.
const agentTestEpoch = int64(1_800_000_000) * int64(time.Second)

const agentTestConfig = `name: test-node
rules:
  - name: fixed
    count: 3
    time_window: 10
    window_type: fixed
    sync_interval: 0.5
  - name: sliding
    count: 3
    time_window: 10
    sync_interval: 0.5
`

// writeFile writes data to name in a fresh temporary directory.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startTestAgent starts an agent from a config file on a loopback port with
// the clock stopped at now, and returns its address.
func startTestAgent(t *testing.T, config string, now int64) string {
	t.Helper()
	path := writeFile(t, "sluice.yaml", config)
	var stdout, stderr lockedBuffer
	opts, err := parseAgentFlags([]string{"--config", path, "--grpc-addr", "127.0.0.1:0"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("parseAgentFlags: %v", err)
	}
	opts.now = func() int64 { return now }
	a, err := startAgent(context.Background(), opts)
	if err != nil {
		t.Fatalf("startAgent: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Stop(5 * time.Second); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return a.Addr()
}

// runCmd runs the command line args and returns the exit status and output.
func runCmd(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut lockedBuffer
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAgentThenCheckUntilRefused(t *testing.T) {
	addr := startTestAgent(t, agentTestConfig, agentTestEpoch+int64(2*time.Second))
	tests := []struct {
		rule        string
		wantAllowed []string
		wantRefused string
		wantJSON    checkJSON
	}{
		{
			rule: "fixed",
			wantAllowed: []string{
				"allowed  limit=3 remaining=2 reset_after=8s retry_after=0s",
				"allowed  limit=3 remaining=1 reset_after=8s retry_after=0s",
				"allowed  limit=3 remaining=0 reset_after=8s retry_after=0s",
			},
			// A fixed window waits for the boundary.
			wantRefused: "REFUSED  limit=3 remaining=0 reset_after=8s retry_after=8s",
			wantJSON: checkJSON{Rule: "fixed", Key: "user:42", Hits: 1, Limit: 3,
				ResetAfter: 8, RetryAfter: 8},
		},
		{
			rule: "sliding",
			wantAllowed: []string{
				"allowed  limit=3 remaining=2 reset_after=18s retry_after=0s",
				"allowed  limit=3 remaining=1 reset_after=18s retry_after=0s",
				"allowed  limit=3 remaining=0 reset_after=18s retry_after=0s",
			},
			// A sliding window waits until the spent hits have decayed
			// enough: a third into the next window, rounded up to the ms.
			wantRefused: "REFUSED  limit=3 remaining=0 reset_after=18s retry_after=11.334s",
			wantJSON: checkJSON{Rule: "sliding", Key: "user:42", Hits: 1, Limit: 3,
				ResetAfter: 18, RetryAfter: 11.333333334},
		},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			ctx := context.Background()
			args := []string{"check", "--addr", addr, "--rule", tt.rule, "--key", "user:42"}
			for i, want := range tt.wantAllowed {
				code, out, errOut := runCmd(ctx, args...)
				if code != 0 || strings.TrimSpace(out) != want || errOut != "" {
					t.Fatalf("check %d: exit %d, stdout %q, stderr %q; want exit 0, %q", i, code, out, errOut, want)
				}
			}
			code, out, errOut := runCmd(ctx, args...)
			if code != 1 || strings.TrimSpace(out) != tt.wantRefused || errOut != "" {
				t.Fatalf("spent: exit %d, stdout %q, stderr %q; want exit 1, %q", code, out, errOut, tt.wantRefused)
			}

			code, out, _ = runCmd(ctx, append(args, "--json")...)
			var got checkJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("--json printed %q: %v", out, err)
			}
			if code != 1 || got != tt.wantJSON {
				t.Fatalf("--json: exit %d, %+v; want exit 1, %+v", code, got, tt.wantJSON)
			}
		})
	}
}

func TestAgentMainServesUntilCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- agentMain(ctx, []string{"--grpc-addr", "127.0.0.1:0", "--name", "n1",
			"--gossip-addr", "127.0.0.1:0", "--join", "10.0.0.1:7946,10.0.0.2:7946"},
			&stdout, &stderr, func(addr string) { ready <- addr })
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("agent stopped before serving: %v\n%s", err, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("agent did not start in 10s\n%s", stderr.String())
	}

	// The built-in rules: api is 10 per 10s.
	code, out, errOut := runCmd(ctx, "check", "--addr", addr, "--rule", "api", "--key", "k", "--hits", "0")
	if want := "allowed  limit=10 remaining=10"; code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("check: exit %d, stdout %q, stderr %q; want exit 0 and %q…", code, out, errOut, want)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not stop in 10s after cancel")
	}
	logs := stderr.String()
	for _, want := range []string{
		"sluice agent serving", "grpc_addr=" + addr, "node=n1", "rule=api", "rule=burst",
		"not used yet", "join=\"[10.0.0.1:7946 10.0.0.2:7946]\"", "shutting down", "stopped",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if stdout.String() != "" {
		t.Errorf("agent wrote to stdout: %q", stdout.String())
	}
}

func TestAgentStartErrors(t *testing.T) {
	bad := writeFile(t, "bad.yaml", `rules:
  - name: ok
    count: 1
    time_window: 1
    sync_interval: -1
  - name: api
    count: 0
    time_window: 10
    sync_interval: 0.2
`)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name       string
		args       []string
		wantStderr string // exact, or a prefix when it ends in "…"
	}{
		{"malformed rule file", []string{"--config", bad},
			fmt.Sprintf("sluice agent: %s:7: rule 2 \"api\": count must be ≥ 1, got 0\n", bad)},
		{"missing file", []string{"--config", filepath.Join(t.TempDir(), "nope.yaml")}, "sluice agent: config: open …"},
		{"unknown flag", []string{"--nope"},
			"sluice agent: flag provided but not defined: -nope\nrun 'sluice agent -h' for usage\n"},
		{"stray argument", []string{"extra"},
			"sluice agent: unexpected argument \"extra\"\nrun 'sluice agent -h' for usage\n"},
		{"bad grpc addr", []string{"--grpc-addr", "localhost"},
			"sluice agent: --grpc-addr must be HOST:PORT, got \"localhost\": address localhost: missing port in address\nrun 'sluice agent -h' for usage\n"},
		{"bad join", []string{"--join", "a:1,b"}, "sluice agent: invalid value \"a:1,b\" for flag -join: address must be HOST:PORT…"},
		{"negative shutdown", []string{"--shutdown-timeout", "-1s"}, "sluice agent: --shutdown-timeout must not be negative…"},
		{"port in use", []string{"--grpc-addr", busy.Addr().String()}, "sluice agent: grpc_addr: listen tcp " + busy.Addr().String() + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), append([]string{"agent"}, tt.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			// The agent's own log lines go to stderr before the error; the
			// error is the last line(s).
			if prefix, ok := strings.CutSuffix(tt.wantStderr, "…"); ok {
				if !strings.Contains(stderr, prefix) {
					t.Errorf("stderr %q, want it to contain %q", stderr, prefix)
				}
			} else if stderr != tt.wantStderr {
				t.Errorf("stderr\n got %q\nwant %q", stderr, tt.wantStderr)
			}
		})
	}
}
