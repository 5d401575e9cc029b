package cluster

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// freeAddr returns a loopback address whose port nothing holds now: one a
// listener had and gave back.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// TestReadyAtStart checks which nodes are ready as soon as Start returns:
// those that pulled the fleet's state and those alone; not one whose seeds
// do not answer.
func TestReadyAtStart(t *testing.T) {
	rules := []window.Rule{{Name: "api", Count: 10, Window: time.Second}}
	first := startMemberClock(t, "first", rules, nil, "", nil)
	self := freeAddr(t)
	tests := []struct {
		name      string
		bind      string // gossip address, "" for none
		join      []string
		wantReady bool
	}{
		{"no gossip", "", nil, true},
		{"gossip, no seeds: the fleet's first node", "127.0.0.1:0", nil, true},
		{"its own address as its seed", self, []string{self}, true},
		{"a seed that answers: pulled", "127.0.0.1:0", []string{first.GossipAddr()}, true},
		{"a seed that does not answer", "127.0.0.1:0", []string{freeAddr(t)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Name: "node", Rules: rules, BindAddr: tt.bind, Join: tt.join,
				JoinTimeout: 2 * time.Second, Logger: testLogger(t)}
			if tt.bind != "" {
				cfg.GRPCAddr = "127.0.0.1:0"
			}
			began := time.Now()
			n, err := Start(context.Background(), cfg)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer n.Close()
			if got := n.Ready(); got != tt.wantReady {
				t.Errorf("Ready() = %v, want %v", got, tt.wantReady)
			}
			// A node that knows it is alone does not wait out its join
			// timeout for a peer to pull from.
			if took := time.Since(began); tt.wantReady && took >= cfg.JoinTimeout {
				t.Errorf("Start took %v, at least the join timeout %v", took, cfg.JoinTimeout)
			}
			if err := n.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if n.Ready() {
				t.Error("Ready() after Close = true, want false")
			}
		})
	}
}

// TestReadyAfterLatePull starts a node whose seed does not answer, then a
// peer that joins it: the node becomes ready once it has pulled the
// peer's state, and /readyz says so.
func TestReadyAfterLatePull(t *testing.T) {
	rules := []window.Rule{{Name: "api", Count: 10, Window: time.Second}}
	n, err := Start(context.Background(), Config{Name: "late", Rules: rules, GRPCAddr: "127.0.0.1:0",
		BindAddr: "127.0.0.1:0", Join: []string{freeAddr(t)}, JoinTimeout: 200 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	srv := serveHTTP(t, n)
	if n.Ready() {
		t.Fatal("Ready() before any peer = true")
	}
	status, _, body := httpDo(t, "GET", srv.URL+"/readyz", "")
	if status != 503 || body != "not ready: the fleet's state has not been pulled from a peer yet (none answered)\n" {
		t.Fatalf("/readyz before a peer: %d %q", status, body)
	}
	startMemberClock(t, "peer", rules, []*Node{n}, "", nil)
	waitFor(t, patience, "the node to pull the peer's state", n.Ready)
	if status, _, body := httpDo(t, "GET", srv.URL+"/readyz", ""); status != 200 || body != "ready\n" {
		t.Fatalf("/readyz after the pull: %d %q, want 200 \"ready\\n\"", status, body)
	}
	if got := n.Metrics().LatePulls; got != 1 {
		t.Errorf("LatePulls = %d, want 1", got)
	}
}
