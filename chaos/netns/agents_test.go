//go:build linux

package netns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ports every agent listens on, each on its own namespace's address.
const (
	grpcPort   = "7070"
	gossipPort = "7946"
	httpPort   = "8070" // /metrics and /healthz, for a look by hand
)

// cliTimeout bounds one `sluice check` or `sluice members` process from the
// outside; the command's own --timeout is shorter.
const cliTimeout = 30 * time.Second

// stopGrace is how long a stopped agent may take to leave and drain before
// it is killed.
const stopGrace = 10 * time.Second

// buildSluice compiles cmd/sluice into a temporary directory, with the race
// detector when this test has it, and returns the binary's path.
func buildSluice(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	args = append(args, "github.com/sluicehq/sluice/cmd/sluice")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// agent is one `sluice agent` process running in its node's namespace.
type agent struct {
	node nsNode
	cmd  *exec.Cmd
	log  string        // the file its stdout and stderr go to
	done chan struct{} // closed when the process has exited
	err  error         // what Wait returned; read after done
}

// fleet is the agents of a topology and the binary they run; it runs the
// CLI in a node's namespace.
type fleet struct {
	bin    string
	agents []*agent
}

// startFleet starts one agent per node with the config at cfg, every node
// after the first joining the first, and stops them all when t ends: each
// gets SIGTERM and, if it is still running after stopGrace, SIGKILL.
func startFleet(t *testing.T, bin, cfg string, tp *topology) *fleet {
	t.Helper()
	f := &fleet{bin: bin}
	logs := t.TempDir()
	seed := tp.nodes[0].ip + ":" + gossipPort
	t.Cleanup(func() {
		// One at a time, last started first: an agent leaving while every
		// peer leaves too waits in vain for its leave to be heard.
		for _, a := range slices.Backward(f.agents) {
			select {
			case <-a.done:
				continue // alive has reported it
			default:
			}
			a.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-a.done:
				if r := raceReport(a.log); r != "" {
					t.Errorf("agent %s: the race detector reported:\n%s", a.node.name, r)
				} else if a.err != nil {
					t.Errorf("agent %s: on SIGTERM: %v\n%s", a.node.name, a.err, tail(a.log, 5))
				}
			case <-time.After(stopGrace):
				t.Errorf("agent %s did not stop within %v of SIGTERM; killing it", a.node.name, stopGrace)
				a.cmd.Process.Kill()
				<-a.done
			}
		}
		if t.Failed() {
			for _, a := range f.agents {
				t.Logf("agent %s log (last 60 lines of %s):\n%s", a.node.name, a.log, tail(a.log, 60))
			}
		}
	})
	for i, n := range tp.nodes {
		args := []string{"netns", "exec", n.ns, bin, "agent", "--config", cfg, "--name", n.name,
			"--grpc-addr", n.ip + ":" + grpcPort, "--gossip-addr", n.ip + ":" + gossipPort,
			"--http-addr", n.ip + ":" + httpPort,
			// The namespaces' addresses are no loopback: plaintext there
			// is the test's choice.
			"--insecure"}
		if i > 0 {
			args = append(args, "--join", seed)
		}
		a := &agent{node: n, log: filepath.Join(logs, n.name+".log"), done: make(chan struct{})}
		out, err := os.Create(a.log)
		if err != nil {
			t.Fatal(err)
		}
		// `ip netns exec` execs the agent in place: the process started
		// here is the agent, so signals reach it directly. Pdeathsig takes
		// it down with the test process if that dies before cleanup.
		a.cmd = exec.Command("ip", args...)
		a.cmd.Stdout, a.cmd.Stderr = out, out
		// A race-built agent reports races in its log and goes on; the
		// cleanup fails the run with the first report.
		a.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := a.cmd.Start(); err != nil {
			out.Close()
			t.Fatalf("start agent %s: %v", n.name, err)
		}
		f.agents = append(f.agents, a)
		go func() {
			defer close(a.done)
			a.err = a.cmd.Wait()
			out.Close()
		}()
	}
	return f
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// raceReport returns the first data race report in the log at path, or "".
func raceReport(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	_, report, found := strings.Cut(string(b), "WARNING: DATA RACE")
	if !found {
		return ""
	}
	report, _, _ = strings.Cut(report, "==================")
	return "WARNING: DATA RACE" + report
}

// alive fails t if an agent has exited: every later answer would mislead.
func (f *fleet) alive(t *testing.T) {
	t.Helper()
	for _, a := range f.agents {
		select {
		case <-a.done:
			t.Fatalf("agent %s exited: %v\n%s", a.node.name, a.err, tail(a.log, 40))
		default:
		}
	}
}

// run runs `sluice args…` in n's namespace and returns its stdout, stderr
// and exit status; an error means it could not be run at all.
func (f *fleet) run(ctx context.Context, n nsNode, args ...string) (stdout, stderr string, code int, err error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.ns, f.bin}, args...)...)
	// A race-built binary otherwise lingers a second at exit, and the
	// test runs a few hundred of these.
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return o.String(), e.String(), 0, nil
	case errors.As(err, &exit) && exit.Exited():
		return o.String(), e.String(), exit.ExitCode(), nil
	}
	return o.String(), e.String(), -1, fmt.Errorf("sluice %s in %s: %w: %s", strings.Join(args, " "), n.ns, err, e.String())
}

// decision is what one `sluice check` reported.
type decision struct {
	node      string
	exit      int    // 0 allowed, 1 refused, 2 error
	Allowed   bool   `json:"allowed"`
	Remaining int64  `json:"remaining"`
	Path      string `json:"path"`
	stderr    string
	took      time.Duration // the whole process, launch included
}

func (d decision) String() string {
	if d.exit > 1 {
		return fmt.Sprintf("%s: exit %d after %v: %s", d.node, d.exit, d.took.Round(time.Millisecond), strings.TrimSpace(d.stderr))
	}
	return fmt.Sprintf("%s: allowed=%v remaining=%d path=%s after %v", d.node, d.Allowed, d.Remaining, d.Path, d.took.Round(time.Millisecond))
}

// check runs `sluice check` against n's agent from inside n's namespace,
// with the command's own deadline timeout.
func (f *fleet) check(t *testing.T, n nsNode, rule, key string, hits int64, timeout time.Duration) decision {
	t.Helper()
	start := time.Now()
	out, errOut, code, err := f.run(t.Context(), n, "check", "--addr", n.ip+":"+grpcPort, "--rule", rule,
		"--key", key, "--hits", fmt.Sprint(hits), "--timeout", timeout.String(), "--json")
	if err != nil {
		t.Fatal(err)
	}
	// Under --json, an error is a JSON object on stdout.
	d := decision{node: n.name, exit: code, stderr: errOut + out, took: time.Since(start)}
	if code == 0 || code == 1 {
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("sluice check on %s printed %q: %v", n.name, out, err)
		}
	}
	return d
}

// members returns the members n's agent lists, by name, with their gossip
// state; an error when the agent does not answer.
func (f *fleet) members(ctx context.Context, n nsNode) (map[string]string, error) {
	out, errOut, code, err := f.run(ctx, n, "members", "--addr", n.ip+":"+grpcPort, "--timeout", "2s", "--json")
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("sluice members on %s: exit %d: %s", n.name, code, strings.TrimSpace(errOut))
	}
	var resp struct {
		Members []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		return nil, fmt.Errorf("sluice members on %s printed %q: %w", n.name, out, err)
	}
	m := map[string]string{}
	for _, x := range resp.Members {
		m[x.Name] = x.State
	}
	return m, nil
}

// hold returns at the time until, for a fault that lasts that long,
// checking meanwhile that every agent still runs.
func (f *fleet) hold(t *testing.T, until time.Time) {
	t.Helper()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(until) {
		f.alive(t)
		select {
		case <-t.Context().Done():
			t.Fatalf("holding the fault: %v", t.Context().Err())
		case <-tick.C:
		}
	}
}

// agent returns n's agent.
func (f *fleet) agent(n nsNode) *agent {
	for _, a := range f.agents {
		if a.node.name == n.name {
			return a
		}
	}
	return nil
}

// logHas reports whether the agent's log holds s.
func (a *agent) logHas(s string) bool {
	b, err := os.ReadFile(a.log)
	return err == nil && strings.Contains(string(b), s)
}

// waitFor polls cond until it holds, every quarter second, and fails t with
// what cond last said when it does not hold within limit. It returns how
// long the wait took.
func (f *fleet) waitFor(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		f.alive(t)
		ok, last := cond()
		if ok {
			return time.Since(start)
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %v; last: %s", what, limit, last)
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-tick.C:
		}
	}
}
