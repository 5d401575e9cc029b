//go:build linux

package netns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// subnet is the private /24 the nodes' addresses come from. The addresses
// exist only inside the namespaces the test creates, so nothing the test
// sends can leave them.
const subnet = "10.211.0"

// ipTimeout bounds one `ip` command; they return in milliseconds.
const ipTimeout = 30 * time.Second

// nsNode is one node's namespace: its name, its address on the bridge, and
// the bridge-side end of its veth, which partition takes down.
type nsNode struct {
	name string // the agent's --name: a, b, c
	ns   string // the network namespace
	ip   string // its address in subnet
	port string // the veth end in the bridge namespace
}

// topology is a bridge namespace and one namespace per node, each node's
// eth0 a veth whose other end is a port of the bridge.
type topology struct {
	bridge string // the namespace holding the bridge
	nodes  []nsNode
}

// skipWithoutNetns skips t unless namespaces can be made here: it needs
// root and iproute2.
func skipWithoutNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root and ip netns: not running as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("needs root and ip netns: ip (iproute2) not found: %v", err)
	}
}

// ip runs `ip args…` and returns its combined output.
func ip(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ipTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// newTopology creates the namespaces for names and wires them, all named
// after this process so that concurrent runs do not collide, and removes
// them when t ends. It skips t when the first namespace cannot be made.
func newTopology(t *testing.T, names ...string) *topology {
	t.Helper()
	ctx := context.Background() // cleanup must run after t's context ends
	sweepStale(t)
	prefix := fmt.Sprintf("sluice-%d-", os.Getpid())
	tp := &topology{bridge: prefix + "br"}
	if _, err := ip(ctx, "netns", "add", tp.bridge); err != nil {
		t.Skipf("needs root and ip netns: %v", err)
	}
	made := []string{tp.bridge}
	t.Cleanup(func() {
		// Deleting a namespace destroys the veth ends in it, and with them
		// their peers; the agents must be gone first (their cleanup was
		// registered later, so it has run).
		for _, ns := range made {
			if _, err := ip(ctx, "netns", "del", ns); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	must := func(args ...string) {
		t.Helper()
		if _, err := ip(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	must("-n", tp.bridge, "link", "set", "lo", "up")
	must("-n", tp.bridge, "link", "add", "br0", "type", "bridge")
	must("-n", tp.bridge, "link", "set", "br0", "up")
	for i, name := range names {
		n := nsNode{name: name, ns: prefix + name, ip: fmt.Sprintf("%s.%d", subnet, i+1), port: "p-" + name}
		must("netns", "add", n.ns)
		made = append(made, n.ns)
		// Both ends are made in the bridge namespace and one is moved at
		// once: no interface ever appears in the host's namespace.
		must("-n", tp.bridge, "link", "add", n.port, "type", "veth", "peer", "name", "eth0", "netns", n.ns)
		must("-n", tp.bridge, "link", "set", n.port, "master", "br0")
		must("-n", tp.bridge, "link", "set", n.port, "up")
		must("-n", n.ns, "link", "set", "lo", "up")
		must("-n", n.ns, "addr", "add", n.ip+"/24", "dev", "eth0")
		must("-n", n.ns, "link", "set", "eth0", "up")
		tp.nodes = append(tp.nodes, n)
	}
	return tp
}

// sweepStale deletes the namespaces of earlier runs whose process is gone:
// a run killed before its cleanup (a test timeout) leaves them behind.
func sweepStale(t *testing.T) {
	t.Helper()
	// The names newTopology makes; the number is the process that made them.
	staleName := regexp.MustCompile(`^sluice-([0-9]+)-[a-z]+$`)
	out, err := ip(context.Background(), "netns", "list")
	if err != nil {
		return // newTopology skips or fails with the reason
	}
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		m := staleName.FindStringSubmatch(fields[0])
		if m == nil {
			continue
		}
		if _, err := os.Stat("/proc/" + m[1]); err == nil {
			continue // its process still runs: perhaps a concurrent run
		}
		if _, err := ip(context.Background(), "netns", "del", fields[0]); err != nil {
			t.Logf("stale namespace of an earlier run: %v", err)
		} else {
			t.Logf("deleted the stale namespace %s of an earlier run", fields[0])
		}
	}
}

// node returns the node called name.
func (tp *topology) node(t *testing.T, name string) nsNode {
	t.Helper()
	for _, n := range tp.nodes {
		if n.name == name {
			return n
		}
	}
	t.Fatalf("no node %q", name)
	return nsNode{}
}

// partition cuts n off the bridge: its port goes down, and packets to and
// from n are dropped without an answer, as on a failed link.
func (tp *topology) partition(t *testing.T, n nsNode) {
	t.Helper()
	if _, err := ip(t.Context(), "-n", tp.bridge, "link", "set", n.port, "down"); err != nil {
		t.Fatal(err)
	}
}

// heal puts n back on the bridge.
func (tp *topology) heal(t *testing.T, n nsNode) {
	t.Helper()
	if _, err := ip(t.Context(), "-n", tp.bridge, "link", "set", n.port, "up"); err != nil {
		t.Fatal(err)
	}
}
