package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// A node killed mid-window and started again under its name comes back with
// a new incarnation, pulls the fleet's counts, and hands out no fresh budget;
// no node forgets what its earlier run admitted.
func TestRestartMidWindowKeepsTheBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster for several seconds")
	}
	const count = 600
	// The whole test runs in one window, however slow the machine: an hour.
	rule := window.Rule{Name: "api", Count: count, Window: time.Hour, Type: window.Fixed,
		SyncInterval: 100 * time.Millisecond}
	clock := alignedClock(rule.Window)
	cl := startCluster(t, 3, []window.Rule{rule}, clock)
	idx := window.Index(clock(), rule.Window)

	adm := &admissions{per: map[int64]int64{}}
	// run has each node ask for perNode hits at 150/s.
	run := func(nodes []*Node, perNode int) {
		var wg sync.WaitGroup
		for _, nd := range nodes {
			wg.Go(func() { drive(context.Background(), nd, rule, "user:7", 150, perNode, adm) })
		}
		wg.Wait()
	}

	// 3 × 150: 450 of 600 spent, a third of it by node-2.
	run(cl, 150)
	victim := cl[2]
	own, _, _ := victim.View(rule.Name, "user:7")
	if own.Curr == 0 {
		t.Fatal("node-2 admitted nothing before the restart")
	}
	// Let the last deltas land, then crash node-2.
	waitFor(t, patience, "every node has heard every admission", func() bool {
		for _, nd := range cl {
			if _, v, _ := nd.View(rule.Name, "user:7"); v.Curr != adm.per[idx] {
				return false
			}
		}
		return true
	})
	gossip := victim.GossipAddr()
	victim.Kill()
	for _, nd := range cl[:2] {
		if _, view, _ := nd.View(rule.Name, "user:7"); view.Curr < adm.per[idx] {
			t.Errorf("%s sees %d after the crash, fewer than the %d admitted", nd.Name(), view.Curr, adm.per[idx])
		}
	}

	// Same name, same gossip address, a new incarnation.
	back := startMemberClock(t, "node-2", []window.Rule{rule}, cl[:2], gossip, clock)
	if back.Incarnation() == victim.Incarnation() {
		t.Fatal("the restarted node kept its incarnation")
	}
	_, view, _ := back.View(rule.Name, "user:7")
	if view.Curr < adm.per[idx] {
		t.Fatalf("restarted node sees %d admitted in the window, want the %d admitted before (its earlier run included)",
			view.Curr, adm.per[idx])
	}
	waitFor(t, patience, "the survivors stream to the new incarnation", func() bool {
		return cl[0].metrics.Peers.Load() == 2 && cl[1].metrics.Peers.Load() == 2
	})

	// Everyone, the restarted node included, now asks for far more than is
	// left: 3 × 300 against the 150 or so.
	run([]*Node{cl[0], cl[1], back}, 300)
	if now := window.Index(clock(), rule.Window); now != idx {
		t.Fatalf("the test ran past its window (%d → %d)", idx, now)
	}
	total := adm.counts(idx).Curr
	t.Logf("window admitted %d of %d across the restart", total, count)
	if float64(total) > count*1.03 {
		t.Errorf("window admitted %d, over the count %d: the restart handed out fresh budget", total, count)
	}
	for _, nd := range []*Node{cl[0], cl[1], back} {
		if _, view, _ := nd.View(rule.Name, "user:7"); view.Curr < total*97/100 {
			t.Errorf("%s sees %d of the %d admitted", nd.Name(), view.Curr, total)
		}
	}
}
