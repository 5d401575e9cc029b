package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/window"
)

// fastGossip makes memberlist declare a silent member dead, and forget it,
// within about a second rather than tens of seconds.
func fastGossip(mc *memberlist.Config) {
	mc.ProbeInterval = 100 * time.Millisecond
	mc.ProbeTimeout = 50 * time.Millisecond
	mc.SuspicionMult = 2
	mc.GossipInterval = 50 * time.Millisecond
	mc.GossipToTheDeadTime = 300 * time.Millisecond
	mc.PushPullInterval = 500 * time.Millisecond
}

// startHealing starts a node that fails members fast and reconnects often.
func startHealing(t *testing.T, name, gossip string, join []string) *Node {
	t.Helper()
	nd, err := Start(context.Background(), Config{
		Name: name, GRPCAddr: "127.0.0.1:0", BindAddr: gossip, Join: join,
		Rules:       []window.Rule{{Name: "r", Count: 10, Window: time.Minute, Type: window.Fixed, SyncInterval: 100 * time.Millisecond}},
		JoinTimeout: 5 * time.Second, ShutdownTimeout: time.Second, Logger: testLogger(t),
		ReconnectInterval: 200 * time.Millisecond, GossipTuning: fastGossip,
	})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}

func peersAre(nodes []*Node, want int64) func() bool {
	return func() bool {
		for _, nd := range nodes {
			if nd.Metrics().Peers != want {
				return false
			}
		}
		return true
	}
}

// TestRestartedSeedRejoins kills the seed every node joined through, waits
// until the others have declared it dead and forgotten it, and restarts it
// under its old name and address with no seeds of its own. The others must
// find it again by themselves.
func TestRestartedSeedRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	seed := startHealing(t, "node-0", "127.0.0.1:0", nil)
	addr := seed.GossipAddr()
	others := []*Node{startHealing(t, "node-1", "127.0.0.1:0", []string{addr}), startHealing(t, "node-2", "127.0.0.1:0", []string{addr})}
	waitFor(t, patience, "every node sees every other", peersAre(append([]*Node{seed}, others...), 2))

	seed.Kill()
	waitFor(t, patience, "the others to declare the seed dead", peersAre(others, 1))
	// Stay down for ten times memberlist's gossip-to-the-dead time: long
	// past the moment it stops contacting a dead member.
	stayDown(10 * 300 * time.Millisecond)

	restarted := startHealing(t, "node-0", addr, nil)
	all := append([]*Node{restarted}, others...)
	waitFor(t, patience, "the restarted seed and the others to see each other", peersAre(all, 2))
	var reconnects int64
	for _, nd := range others {
		reconnects += nd.Metrics().Reconnects
	}
	if reconnects == 0 {
		t.Errorf("the fleet healed without a reconnect: the test did not exercise one")
	}
}

// stayDown is how long a scenario keeps a node down: the fault's length,
// not a wait for anything to happen.
func stayDown(d time.Duration) { <-time.After(d) }

// TestMembersShowSuspectAndFailed kills a member and lists the cluster from
// another: the dead member must never show alive; it shows suspect while
// gossip still lists it, then failed while it is being reconnected.
func TestMembersShowSuspectAndFailed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster")
	}
	a := startHealing(t, "node-a", "127.0.0.1:0", nil)
	b := startHealing(t, "node-b", "127.0.0.1:0", []string{a.GossipAddr()})
	waitFor(t, patience, "both nodes see each other", peersAre([]*Node{a, b}, 1))
	svc := &peerService{node: a}
	stateOfB := func() string {
		resp, err := svc.Members(context.Background(), nil)
		if err != nil {
			t.Fatalf("Members: %v", err)
		}
		for _, m := range resp.GetMembers() {
			if m.GetName() == "node-b" {
				return m.GetState()
			}
		}
		return ""
	}
	if got := stateOfB(); got != "alive" {
		t.Fatalf("node-b before the crash: %q, want alive", got)
	}
	b.Kill()
	seen := map[string]bool{}
	waitFor(t, patience, "node-b listed as failed", func() bool {
		s := stateOfB()
		seen[s] = true
		return s == "failed"
	})
	if seen["alive"] {
		t.Errorf("a killed member was listed alive; states seen: %v", seen)
	}
	if !seen["suspect"] {
		t.Logf("gossip declared node-b dead before a listing saw it suspect; states seen: %v", seen)
	}
}
