package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster/configfile"
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
// the clock stopped at now, and returns its gRPC address.
func startTestAgent(t *testing.T, config string, now int64) string {
	t.Helper()
	path := writeFile(t, "sluice.yaml", config)
	a := startTestAgentArgs(t, func() time.Time { return time.Unix(0, now) }, "--config", path, "--grpc-addr", "127.0.0.1:0")
	return a.GRPCAddr()
}

// startTestAgentArgs starts an agent in this process from a command line,
// as `sluice agent` would, with the node's clock at now (nil: the wall
// clock). It stops when the test ends.
func startTestAgentArgs(t *testing.T, now func() time.Time, args ...string) *agent {
	t.Helper()
	var stdout, stderr lockedBuffer
	opts, err := parseAgentFlags(args, &stdout, &stderr)
	if err != nil {
		t.Fatalf("parseAgentFlags(%q): %v", args, err)
	}
	opts.now = now
	a, err := startAgent(context.Background(), opts)
	if err != nil {
		t.Fatalf("startAgent(%q): %v\n%s", args, err, stderr.String())
	}
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if t.Failed() {
			t.Logf("logs of agent %s:\n%s", a.node.Name(), stderr.String())
		}
	})
	return a
}

// httpGet fetches url and returns the status and body.
func httpGet(t *testing.T, url string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
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
				"allowed  limit=3 remaining=2 reset_after=8s retry_after=0s path=local",
				"allowed  limit=3 remaining=1 reset_after=8s retry_after=0s path=local",
				"allowed  limit=3 remaining=0 reset_after=8s retry_after=0s path=local",
			},
			// A fixed window waits for the boundary.
			wantRefused: "REFUSED  limit=3 remaining=0 reset_after=8s retry_after=8s path=local",
			wantJSON: checkJSON{Rule: "fixed", Key: "user:42", Hits: 1, Limit: 3,
				ResetAfter: 8, RetryAfter: 8, Path: "local"},
		},
		{
			rule: "sliding",
			wantAllowed: []string{
				"allowed  limit=3 remaining=2 reset_after=18s retry_after=0s path=local",
				"allowed  limit=3 remaining=1 reset_after=18s retry_after=0s path=local",
				"allowed  limit=3 remaining=0 reset_after=18s retry_after=0s path=local",
			},
			// A sliding window waits until the spent hits have decayed
			// enough: a third into the next window, rounded up to the ms.
			wantRefused: "REFUSED  limit=3 remaining=0 reset_after=18s retry_after=11.334s path=local",
			wantJSON: checkJSON{Rule: "sliding", Key: "user:42", Hits: 1, Limit: 3,
				ResetAfter: 18, RetryAfter: 11.333333334, Path: "local"},
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
	seed := startTestAgentArgs(t, nil, "--name", "seed", "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	ready := make(chan *agent, 1)
	done := make(chan error, 1)
	go func() {
		done <- agentMain(ctx, []string{"--grpc-addr", "127.0.0.1:0", "--name", "n1",
			"--gossip-addr", "127.0.0.1:0", "--join", seed.GossipAddr(), "--http-addr", "127.0.0.1:0"},
			&stdout, &stderr, func(a *agent) { ready <- a })
	}()
	var a *agent
	select {
	case a = <-ready:
	case err := <-done:
		t.Fatalf("agent stopped before serving: %v\n%s", err, stderr.String())
	case <-time.After(patience):
		t.Fatalf("agent did not start in %v\n%s", patience, stderr.String())
	}

	// The built-in rules: api is 10 per 10s. (remaining is this node's
	// share of the budget, which depends on the cluster's size.)
	code, out, errOut := runCmd(ctx, "check", "--addr", a.GRPCAddr(), "--rule", "api", "--key", "k", "--hits", "0")
	if want := "allowed  limit=10 remaining="; code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("check: exit %d, stdout %q, stderr %q; want exit 0 and %q…", code, out, errOut, want)
	}
	if status, body, err := httpGet(t, "http://"+a.HTTPAddr()+"/healthz"); err != nil || status != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q %v, want 200 \"ok\\n\"", status, body, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent: %v", err)
		}
	case <-time.After(patience):
		t.Fatalf("agent did not stop in %v after cancel", patience)
	}
	if _, _, err := httpGet(t, "http://"+a.HTTPAddr()+"/healthz"); err == nil {
		t.Error("the HTTP server still answers after the agent stopped")
	}
	logs := stderr.String()
	for _, want := range []string{
		"sluice agent serving", "node=n1", "grpc_addr=" + a.GRPCAddr(), "gossip_addr=" + a.GossipAddr(),
		"http_addr=" + a.HTTPAddr(), "rules=api,burst", "join=[" + seed.GossipAddr() + "]",
		"rule=api", "rule=burst", "joined the cluster", "shutting down", "stopped",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "not used yet") {
		t.Errorf("logs still say settings are not used:\n%s", logs)
	}
	if stdout.String() != "" {
		t.Errorf("agent wrote to stdout: %q", stdout.String())
	}
}

// agentClusterConfig are the rules every node of the cluster test enforces.
const agentClusterConfig = `rules:
  - name: api
    count: 100
    time_window: 10
    sync_interval: 0.1
`

func TestAgentCluster(t *testing.T) {
	path := writeFile(t, "cluster.yaml", agentClusterConfig)
	common := []string{"--config", path, "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--shutdown-timeout", "2s"}
	first := startTestAgentArgs(t, nil, append(common, "--name", "node-a")...)
	agents := []*agent{first}
	for _, name := range []string{"node-b", "node-c"} {
		agents = append(agents, startTestAgentArgs(t, nil, append(common, "--name", name, "--join", first.GossipAddr())...))
	}
	ctx := context.Background()

	for _, a := range agents {
		name := a.node.Name()
		waitUntil(t, patience, name+" lists 3 alive members with matching rules", func() (bool, string) {
			code, out, errOut := runCmd(ctx, "members", "--addr", a.GRPCAddr(), "--json")
			if code != 0 {
				return false, fmt.Sprintf("exit %d: %s", code, errOut)
			}
			var got membersJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				return false, fmt.Sprintf("%v: %s", err, out)
			}
			if len(got.Members) != 3 {
				return false, out
			}
			for i, m := range got.Members {
				want := agents[i]
				if m.Name != want.node.Name() || m.State != "alive" || !m.RulesMatch || m.Self != (want == a) ||
					m.GRPCAddr != want.GRPCAddr() || m.GossipAddr != want.GossipAddr() ||
					m.Boot != fmt.Sprintf("%016x", want.node.Incarnation().Boot) {
					return false, out
				}
			}
			return true, ""
		})
	}

	// The table, as an operator sees it.
	code, out, errOut := runCmd(ctx, "members", "--addr", agents[1].GRPCAddr())
	if code != 0 || errOut != "" {
		t.Fatalf("members: exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || strings.Fields(lines[0])[0] != "NAME" {
		t.Fatalf("members printed %d lines, want a header and 3 members:\n%s", len(lines), out)
	}
	for i, a := range agents {
		want := []string{a.node.Name(), "alive", a.GRPCAddr(), a.GossipAddr(),
			fmt.Sprintf("%016x", a.node.Incarnation().Boot), "match"}
		if i == 1 {
			want = append([]string{"*"}, want...)
		}
		if got := strings.Fields(lines[i+1]); !slices.Equal(got, want) {
			t.Errorf("members line %d: %q, want %q", i+1, got, want)
		}
	}

	for _, a := range agents {
		name := a.node.Name()
		waitUntil(t, patience, name+"'s /metrics shows 3 members", func() (bool, string) {
			status, body, err := httpGet(t, "http://"+a.HTTPAddr()+"/metrics")
			return err == nil && status == 200 && strings.Contains(body, "\n"+`sluice_members{state="alive"} 3`+"\n"),
				fmt.Sprintf("%d %v\n%s", status, err, body)
		})
		for _, path := range []string{"/healthz", "/readyz"} {
			want := map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"}[path]
			if status, body, err := httpGet(t, "http://"+a.HTTPAddr()+path); err != nil || status != 200 || body != want {
				t.Errorf("%s %s: %d %q %v, want 200 %q", name, path, status, body, err, want)
			}
		}
		code, out, errOut := runCmd(ctx, "check", "--addr", a.GRPCAddr(), "--rule", "api", "--key", "k", "--hits", "0")
		if code != 0 || !strings.HasPrefix(out, "allowed  limit=100") {
			t.Errorf("%s check: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
		// The check counts in the node's metrics, beside the Go runtime's
		// and the process's, and the node's traffic with each peer.
		status, body, err := httpGet(t, "http://"+a.HTTPAddr()+"/metrics")
		if err != nil || status != 200 {
			t.Fatalf("%s /metrics: %d %v", name, status, err)
		}
		wants := []string{
			"\n" + `sluice_decisions_total{path="local",result="allowed",rule="api"} 1` + "\n",
			// Present; their values are TestMetricsLoneAgent's to check: a
			// slow ping under load makes a member suspect for a moment, and
			// whether a probe of hits 0 leaves a key depends on who owns it.
			"\n" + `sluice_members{state="suspect"} `,
			"\n" + `sluice_keys{rule="api"} `,
			"\nsluice_ready 1\n",
			"\n# TYPE sluice_decision_duration_seconds histogram\n",
			"\n# TYPE go_goroutines gauge\n",
			"\n# TYPE process_resident_memory_bytes gauge\n",
		}
		for _, o := range agents {
			if o != a {
				wants = append(wants, fmt.Sprintf("\nsluice_peer_sync_messages_sent_total{peer=%q} ", o.node.Name()))
			}
		}
		for _, want := range wants {
			if !strings.Contains(body, want) {
				t.Errorf("%s /metrics lacks %q", name, want)
			}
		}
	}
}

// TestAgentReadyz starts an agent whose seed does not answer: it serves,
// but /readyz says it is not ready until it has pulled the fleet's state
// from a peer, which it does once one joins it.
func TestAgentReadyz(t *testing.T) {
	path := writeFile(t, "cluster.yaml", agentClusterConfig)
	common := []string{"--config", path, "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--shutdown-timeout", "2s"}
	var stderr lockedBuffer
	opts, err := parseAgentFlags(append(common, "--name", "node-a", "--join", deadAddr(t)), io.Discard, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	opts.joinTimeout = 200 * time.Millisecond
	lone, err := startAgent(context.Background(), opts)
	if err != nil {
		t.Fatalf("startAgent: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { lone.Stop() })
	readyz := "http://" + lone.HTTPAddr() + "/readyz"
	status, body, err := httpGet(t, readyz)
	if err != nil || status != 503 || !strings.HasPrefix(body, "not ready: ") || strings.Count(body, "\n") != 1 {
		t.Fatalf("/readyz before a peer: %d %q %v, want 503 and one line of why", status, body, err)
	}
	if status, body, err := httpGet(t, "http://"+lone.HTTPAddr()+"/healthz"); err != nil || status != 200 || body != "ok\n" {
		t.Errorf("/healthz before a peer: %d %q %v, want 200 \"ok\\n\"", status, body, err)
	}
	if status, body, _ := httpGet(t, "http://"+lone.HTTPAddr()+"/metrics"); status != 200 || !strings.Contains(body, "\nsluice_ready 0\n") {
		t.Errorf("/metrics before a peer: %d, want 200 with sluice_ready 0:\n%s", status, body)
	}

	peer := startTestAgentArgs(t, nil, append(common, "--name", "node-b", "--join", lone.GossipAddr())...)
	waitUntil(t, patience, "node-a to be ready once node-b joined it", func() (bool, string) {
		status, body, err := httpGet(t, readyz)
		return err == nil && status == 200 && body == "ready\n", fmt.Sprintf("%d %q %v", status, body, err)
	})
	if status, body, err := httpGet(t, "http://"+peer.HTTPAddr()+"/readyz"); err != nil || status != 200 || body != "ready\n" {
		t.Errorf("node-b /readyz: %d %q %v, want 200 \"ready\\n\"", status, body, err)
	}
	if err := lone.Stop(); err != nil {
		t.Fatal(err)
	}
}

// deadAddr returns a loopback address nothing listens on: one a listener
// had and gave back.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
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
	joinNoGossip := writeFile(t, "join.yaml", "join: [10.0.0.1:7946]\n"+agentClusterConfig)
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name       string
		args       []string
		wantStderr string // exact, or a substring when it ends in "…"
	}{
		{"malformed rule file", []string{"--config", bad},
			fmt.Sprintf("sluice agent: %s:7: rule 2 \"api\": count must be ≥ 1, got 0\n", bad)},
		{"missing file", []string{"--config", filepath.Join(t.TempDir(), "nope.yaml")}, "sluice agent: config: stat …"},
		// Opening a named pipe for reading would block until a writer came,
		// deaf to SIGTERM.
		{"config is a named pipe", []string{"--config", fifo},
			"sluice agent: config: " + fifo + ": not a regular file (a named pipe)\n"},
		{"envoy config is a named pipe", []string{"--envoy-config", fifo},
			"sluice agent: envoy config: " + fifo + ": not a regular file (a named pipe)…"},
		{"config is a directory", []string{"--config", t.TempDir()}, ": not a regular file (a directory)…"},
		{"unknown flag", []string{"--nope"},
			"sluice agent: unknown flag --nope\nrun 'sluice agent --help' for usage\n"},
		{"stray argument", []string{"extra"},
			"sluice agent: unexpected argument \"extra\"\nrun 'sluice agent --help' for usage\n"},
		{"bad grpc addr", []string{"--grpc-addr", "localhost"},
			"sluice agent: --grpc-addr must be HOST:PORT, got \"localhost\": address localhost: missing port in address\nrun 'sluice agent --help' for usage\n"},
		{"bad gossip addr", []string{"--gossip-addr", "127.0.0.1:x"},
			"sluice agent: --gossip-addr must have a port number 0–65535, got \"127.0.0.1:x\"\nrun 'sluice agent --help' for usage\n"},
		{"bad http addr", []string{"--http-addr", "nope"}, "sluice agent: --http-addr must be HOST:PORT, got \"nope\"…"},
		{"bad join", []string{"--gossip-addr", "127.0.0.1:0", "--join", "a:1,b"},
			"sluice agent: invalid value \"a:1,b\" for --join: a --join address must be HOST:PORT or dns:NAME:PORT, got \"b\": address b: missing port in address\nrun 'sluice agent --help' for usage\n"},
		{"join without host", []string{"--gossip-addr", "127.0.0.1:0", "--join", ":7946"},
			"a --join address must be HOST:PORT or dns:NAME:PORT, got \":7946\": the host is empty…"},
		{"dns join without port", []string{"--gossip-addr", "127.0.0.1:0", "--join", "dns:sluice"},
			"got \"dns:sluice\": address sluice: missing port in address…"},
		{"dns join without name", []string{"--gossip-addr", "127.0.0.1:0", "--join", "dns::7946"},
			"got \"dns::7946\": the DNS name is empty…"},
		{"join bad port", []string{"--gossip-addr", "127.0.0.1:0", "--join", "10.0.0.1:70000"},
			"got \"10.0.0.1:70000\": the port must be a number 0–65535…"},
		{"join without gossip", []string{"--join", "10.0.0.1:7946"},
			"sluice agent: --join needs --gossip-addr: a node reaches its peers by gossip\nrun 'sluice agent --help' for usage\n"},
		{"advertise without gossip", []string{"--advertise-addr", "10.0.0.1:7946"},
			"sluice agent: --advertise-addr needs --gossip-addr: a node reaches its peers by gossip\nrun 'sluice agent --help' for usage\n"},
		{"file join without gossip", []string{"--config", joinNoGossip},
			"sluice agent: " + joinNoGossip + ": join needs gossip_addr (or --gossip-addr): a node reaches its peers by gossip\n"},
		{"negative shutdown", []string{"--shutdown-timeout", "-1s"}, "sluice agent: --shutdown-timeout must not be negative…"},
		{"grpc port in use", []string{"--grpc-addr", busy.Addr().String()},
			"sluice agent: start node: sluice: grpc_addr: listen tcp " + busy.Addr().String() + "…"},
		{"http port in use", []string{"--grpc-addr", "127.0.0.1:0", "--http-addr", busy.Addr().String()},
			"sluice agent: http_addr: listen tcp " + busy.Addr().String() + "…"},
	}
	tests = append(tests, agentTLSErrors(t)...)
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
			if sub, ok := strings.CutSuffix(tt.wantStderr, "…"); ok {
				if !strings.Contains(stderr, sub) {
					t.Errorf("stderr %q, want it to contain %q", stderr, sub)
				}
			} else if stderr != tt.wantStderr {
				t.Errorf("stderr\n got %q\nwant %q", stderr, tt.wantStderr)
			}
		})
	}
}

func TestParseAgentFlagsMerge(t *testing.T) {
	file := writeFile(t, "node.yaml", `name: from-file
grpc_addr: 127.0.0.1:7070
gossip_addr: 127.0.0.1:7946
http_addr: 127.0.0.1:9090
join: [127.0.0.1:7947]
`+agentClusterConfig)
	tests := []struct {
		name string
		args []string
		want configfile.Config // Rules and Path are not compared
		wait time.Duration
	}{
		{"defaults", nil,
			configfile.Config{GRPCAddr: defaultGRPCAddr}, 10 * time.Second},
		{"file", []string{"--config", file},
			configfile.Config{Name: "from-file", GRPCAddr: "127.0.0.1:7070", GossipAddr: "127.0.0.1:7946",
				HTTPAddr: "127.0.0.1:9090", Join: []string{"127.0.0.1:7947"}}, 10 * time.Second},
		{"flags override the file", []string{"--config", file, "--name", "n2", "--grpc-addr", ":7071",
			"--gossip-addr", "0.0.0.0:7948", "--advertise-addr", "10.0.0.2:7948", "--http-addr", "",
			"--join", "dns:sluice.default.svc:7946", "--join", "10.0.0.1:7946, [::1]:7946",
			"--data-dir", "/tmp/x", "--shutdown-timeout", "0", "--insecure"},
			configfile.Config{Name: "n2", GRPCAddr: ":7071", GossipAddr: "0.0.0.0:7948", AdvertiseAddr: "10.0.0.2:7948",
				Join: []string{"dns:sluice.default.svc:7946", "10.0.0.1:7946", "[::1]:7946"}, DataDir: "/tmp/x", Insecure: true}, 0},
		{"empty --join clears the file's", []string{"--config", file, "--join", ""},
			configfile.Config{Name: "from-file", GRPCAddr: "127.0.0.1:7070", GossipAddr: "127.0.0.1:7946",
				HTTPAddr: "127.0.0.1:9090"}, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := parseAgentFlags(tt.args, io.Discard, io.Discard)
			if err != nil {
				t.Fatalf("parseAgentFlags: %v", err)
			}
			got := *opts.file
			got.Rules, got.Path = nil, ""
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("config\n got %+v\nwant %+v", got, tt.want)
			}
			if opts.shutdownTimeout != tt.wait {
				t.Errorf("shutdown timeout %v, want %v", opts.shutdownTimeout, tt.wait)
			}
		})
	}
}

// TestExampleConfigs checks the shipped example configs: each is valid, and
// the cluster example's three nodes share their rules, use distinct ports
// and join the first.
func TestExampleConfigs(t *testing.T) {
	if _, err := configfile.Load("../../examples/sluice.yaml"); err != nil {
		t.Errorf("examples/sluice.yaml: %v", err)
	}
	var nodes []*configfile.Config
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		f, err := configfile.Load("../../examples/cluster/" + name + ".yaml")
		if err != nil {
			t.Fatalf("%v", err)
		}
		if f.Name != name {
			t.Errorf("%s: name %q, want %q", f.Path, f.Name, name)
		}
		nodes = append(nodes, f)
	}
	ports := map[string]string{}
	for i, f := range nodes {
		if !reflect.DeepEqual(f.Rules, nodes[0].Rules) {
			t.Errorf("%s: rules differ from %s's", f.Path, nodes[0].Path)
		}
		for _, addr := range []string{f.GRPCAddr, f.GossipAddr, f.HTTPAddr} {
			if host, _, err := net.SplitHostPort(addr); err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
				t.Errorf("%s: address %q, want a loopback HOST:PORT", f.Path, addr)
			}
			if other, dup := ports[addr]; dup {
				t.Errorf("%s: %s is also used by %s", f.Path, addr, other)
			}
			ports[addr] = f.Path
		}
		wantJoin := []string{nodes[0].GossipAddr}
		if i == 0 {
			wantJoin = nil
		}
		if !slices.Equal(f.Join, wantJoin) {
			t.Errorf("%s: join %q, want %q", f.Path, f.Join, wantJoin)
		}
	}
	if nodes[0].GRPCAddr != defaultGRPCAddr {
		t.Errorf("node-a serves gRPC on %s; want %s, where sluice check and members call by default",
			nodes[0].GRPCAddr, defaultGRPCAddr)
	}
}
