package agents

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/chaos/sim"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

var (
	agentsFlag  = flag.Int("agents", 0, "run the fleet test with this many sluice agent processes (0: skip)")
	latencyFlag = flag.Duration("agents.latency", 0, "delay every loopback packet by this much (tc netem on lo; needs root), as between regions")
)

// agentLatency is the one-way latency the fleet test adds on loopback:
// -agents.latency, or SLUICE_AGENTS_LATENCY.
func agentLatency(t *testing.T) time.Duration {
	d := *latencyFlag
	if v := os.Getenv("SLUICE_AGENTS_LATENCY"); d == 0 && v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SLUICE_AGENTS_LATENCY=%q: %v", v, err)
		}
	}
	return d
}

// delayLoopback delays every packet on lo by d until t ends. Everything on
// this machine that talks over loopback is slowed meanwhile, which is why
// the test does it only when asked.
func delayLoopback(t *testing.T, d time.Duration) {
	t.Helper()
	tc := func(args ...string) error {
		out, err := exec.Command("tc", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("tc %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := tc("qdisc", "add", "dev", "lo", "root", "netem", "delay", fmt.Sprintf("%dus", d.Microseconds()), "limit", "100000"); err != nil {
		t.Fatalf("adding latency on loopback (root and tc needed): %v", err)
	}
	t.Cleanup(func() {
		if err := tc("qdisc", "del", "dev", "lo", "root"); err != nil {
			t.Errorf("removing the latency on loopback: %v", err)
		}
	})
}

// agentCount is how many agents the fleet test runs: -agents, or
// SLUICE_AGENTS; 0 skips it.
func agentCount(t *testing.T) int {
	n := *agentsFlag
	if v := os.Getenv("SLUICE_AGENTS"); n == 0 && v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SLUICE_AGENTS=%q: %v", v, err)
		}
	}
	return n
}

// scenario is one workload the fleet test runs on the agents and on the
// simulator alike.
type scenario struct {
	name     string
	limit    int64
	window   time.Duration
	typ      window.Type
	sync     time.Duration
	rate     float64 // checks per second over the fleet, spread evenly
	duration time.Duration
	latency  time.Duration // one way, added on loopback
}

// TestFleetMatchesTheSimulator starts N `sluice agent` processes on
// loopback (go test ./chaos/agents -agents 16), sends them one key's checks
// at a steady rate spread evenly over them, and compares what each window
// admitted with what the simulator says the same fleet admits: the median
// window within 2 points of the simulator's, and no window above the
// count by more than 1 %.
func TestFleetMatchesTheSimulator(t *testing.T) {
	n := agentCount(t)
	if n == 0 {
		t.Skip("runs only when asked: go test ./chaos/agents -agents 16 (or SLUICE_AGENTS=16)")
	}
	bin := buildSluice(t)
	latency := agentLatency(t)
	if latency > 0 {
		delayLoopback(t, latency)
	}
	for _, sc := range []scenario{
		{"sliding", 500, time.Second, window.Sliding, 200 * time.Millisecond, 800, 20 * time.Second, latency},
		{"fixed", 500, time.Second, window.Fixed, 200 * time.Millisecond, 800, 20 * time.Second, latency},
		// A count under 20 per agent, where an agent asks the key's owner
		// for hits past its grant.
		{"fixed-small", int64(12 * n), time.Second, window.Fixed, 200 * time.Millisecond, float64(20 * n), 20 * time.Second, latency},
	} {
		t.Run(sc.name, func(t *testing.T) {
			f := startFleet(t, bin, n, sc)
			f.waitFormed(t, 2*time.Minute)
			windows := f.drive(t, sc)
			real := summarize(windows, sc.limit)

			c := sim.Defaults()
			c.Nodes, c.Limit, c.Window, c.Type, c.Sync, c.Rate, c.Duration = n, sc.limit, sc.window, sc.typ, sc.sync, sc.rate, sc.duration
			c.Latency = max(sc.latency, 200*time.Microsecond)
			r, err := sim.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			var simWindows []int64
			for _, w := range r.Windows {
				simWindows = append(simWindows, w.Admitted)
			}
			want := summarize(simWindows, sc.limit)
			t.Logf("%d agents, %d per %v %v, sync %v, %.0f checks/s, %v one way: per window %v", n, sc.limit, sc.window, sc.typ, sc.sync, sc.rate, sc.latency, windows)
			t.Logf("agents: median later window %+.1f %%, worst %+.1f %%; simulator: median %+.1f %%, worst %+.1f %%",
				real.median, real.worst, want.median, want.worst)
			if d := real.median - want.median; d < -2 || d > 2 {
				t.Errorf("median window %+.1f %% against the simulator's %+.1f %%: more than 2 points apart", real.median, want.median)
			}
			if real.worst > 1 {
				t.Errorf("a window admitted %+.1f %% over the count", real.worst)
			}
		})
	}
}

// summary is what the fleet test compares: the median error of the windows
// after the first, and the worst, in % of the count.
type summary struct{ median, worst float64 }

func summarize(windows []int64, limit int64) summary {
	var s summary
	var later []float64
	for i, w := range windows {
		e := 100 * float64(w-limit) / float64(limit)
		s.worst = max(s.worst, e)
		if i > 0 {
			later = append(later, e)
		}
	}
	if len(later) > 0 {
		slices.Sort(later)
		s.median = later[len(later)/2]
	}
	return s
}

// buildSluice compiles cmd/sluice into a temporary directory. The agents
// are built without the race detector, whatever this test's build: what is
// measured is what sixteen ordinary agents admit on this machine.
func buildSluice(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/sluicehq/sluice/cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// agent is one `sluice agent` process.
type agent struct {
	name, grpcAddr, gossipAddr string
	cmd                        *exec.Cmd
	log                        string
	done                       chan struct{}
	conn                       *grpc.ClientConn
}

type fleet struct{ agents []*agent }

// freePort returns a loopback port free for both TCP and UDP, as a gossip
// address needs.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no loopback port free for both TCP and UDP")
	return 0
}

// startFleet starts n agents with the scenario's one rule, each after the
// first joining the first, and stops them when t ends.
func startFleet(t *testing.T, bin string, n int, sc scenario) *fleet {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sluice.yaml")
	rule := fmt.Sprintf("rules:\n  - name: api\n    count: %d\n    time_window: %g\n    window_type: %s\n    sync_interval: %g\n",
		sc.limit, sc.window.Seconds(), sc.typ, sc.sync.Seconds())
	if err := os.WriteFile(cfg, []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fleet{}
	t.Cleanup(func() {
		for _, a := range slices.Backward(f.agents) {
			if a.conn != nil {
				a.conn.Close()
			}
			a.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, a := range f.agents {
			select {
			case <-a.done:
			case <-time.After(10 * time.Second):
				t.Errorf("agent %s did not stop within 10 s of SIGTERM; killing it", a.name)
				a.cmd.Process.Kill()
				<-a.done
			}
		}
		if t.Failed() {
			for _, a := range f.agents[:min(3, len(f.agents))] {
				b, _ := os.ReadFile(a.log)
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("agent %s log (last 20 lines):\n%s", a.name, strings.Join(lines[max(len(lines)-20, 0):], "\n"))
			}
		}
	})
	for i := range n {
		a := &agent{name: fmt.Sprintf("agent-%02d", i),
			grpcAddr:   "127.0.0.1:" + strconv.Itoa(freePort(t)),
			gossipAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
			log:        filepath.Join(dir, fmt.Sprintf("agent-%02d.log", i)), done: make(chan struct{})}
		args := []string{"agent", "--config", cfg, "--name", a.name, "--grpc-addr", a.grpcAddr, "--gossip-addr", a.gossipAddr}
		if i > 0 {
			args = append(args, "--join", f.agents[0].gossipAddr)
		}
		out, err := os.Create(a.log)
		if err != nil {
			t.Fatal(err)
		}
		a.cmd = exec.Command(bin, args...)
		a.cmd.Stdout, a.cmd.Stderr = out, out
		a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := a.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", a.name, err)
		}
		go func() {
			defer close(a.done)
			a.cmd.Wait()
			out.Close()
		}()
		conn, err := grpc.NewClient("passthrough:///"+a.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		a.conn = conn
		f.agents = append(f.agents, a)
	}
	return f
}

// waitFormed waits until every agent lists every other as alive.
func (f *fleet) waitFormed(t *testing.T, patience time.Duration) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		formed := true
		for _, a := range f.agents {
			select {
			case <-a.done:
				t.Fatalf("agent %s exited", a.name)
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := sluicev1.NewPeerClient(a.conn).Members(ctx, &sluicev1.MembersRequest{})
			cancel()
			alive := 0
			if err == nil {
				for _, m := range resp.GetMembers() {
					if m.GetState() == "alive" {
						alive++
					}
				}
			}
			if alive != len(f.agents) {
				formed = false
				break
			}
		}
		if formed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %d agents did not all see each other within %v", len(f.agents), patience)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// drive sends the scenario's checks of one key, evenly over the agents in
// turn, starting on a window boundary, and returns what each whole window
// admitted, by when each answer came back less the one-way latency.
func (f *fleet) drive(t *testing.T, sc scenario) []int64 {
	t.Helper()
	w := int64(sc.window)
	start := (time.Now().UnixNano()/w + 2) * w
	time.Sleep(time.Until(time.Unix(0, start)))
	total := int(sc.rate * sc.duration.Seconds())
	gap := time.Duration(float64(time.Second) / sc.rate)
	clients := make([]sluicev1.LimiterClient, len(f.agents))
	for i, a := range f.agents {
		clients[i] = sluicev1.NewLimiterClient(a.conn)
	}
	var mu sync.Mutex
	admitted := map[int64]int64{}
	var failed error
	var wg sync.WaitGroup
	for i := range total {
		at := time.Unix(0, start).Add(time.Duration(i) * gap)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		c := clients[i%len(clients)]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := c.Check(ctx, &sluicev1.CheckRequest{Rule: "api", Key: "k", Hits: 1})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = err
				return
			}
			if resp.GetAllowed() {
				// Decided a one-way latency before its answer came back.
				admitted[window.Index(time.Now().Add(-sc.latency).UnixNano(), sc.window)]++
			}
		})
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("a check failed: %v", failed)
	}
	first := window.Index(start, sc.window)
	var out []int64
	for idx := first; idx < first+int64(sc.duration/sc.window); idx++ {
		out = append(out, admitted[idx])
	}
	return out
}
