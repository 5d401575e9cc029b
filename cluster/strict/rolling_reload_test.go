package strict

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// rollingRules are a strict rule, so that a strict group exists, and the
// rule "api" batched or strict.
func rollingRules(apiStrict bool) []window.Rule {
	api := window.Rule{Name: "api", Count: 100, Window: time.Hour, Type: window.Fixed, SyncInterval: 50 * time.Millisecond}
	if apiStrict {
		api.SyncInterval = window.Strict
		api.FailMode = window.FailLocal
	}
	return []window.Rule{
		{Name: "s", Count: 10, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict},
		api,
	}
}

// admitN checks key n times on nd and returns how many were admitted.
func admitN(t *testing.T, nd *testNode, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		d, err := nd.Allow(context.Background(), "api", "k", 1)
		if err != nil {
			t.Fatalf("%s: %v", nd.Name(), err)
		}
		if d.Allowed {
			admitted++
		}
	}
	return admitted
}

func viewOf(nd *testNode) int64 {
	_, v, _ := nd.View("api", "k")
	return v.Curr
}

// prepareRolling starts three nodes with "api" batched and spends 90 of its
// 100 across them, waiting until every node has heard all of it.
func prepareRolling(t *testing.T) (nodes []*testNode, leader *testNode) {
	t.Helper()
	// A strict check waits for the log however slow the machine, and a
	// batched one for its key's owner: a check the log or the owner could
	// decide must not fail over, or the counts are not exact.
	nodes = startStrictCluster(t, 3, rollingRules(false), alignedClock(time.Hour), patient)
	leader = waitStrictGroup(t, nodes, patience)
	// Each node spends 30, waiting out a refusal as a client does: with
	// the room held in the others' unspent grants, a loaded machine's late
	// sync round refuses a check below the count until they give it back.
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for _, nd := range nodes {
		lim, err := nd.Limiter("api")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			if err := lim.Wait(ctx, "k", 1); err != nil {
				t.Fatalf("%s: hit %d of 30 in a fresh window of 100: %v", nd.Name(), i+1, err)
			}
		}
	}
	waitFor(t, patience, "every node has heard all 90 admissions", func() bool {
		for _, nd := range nodes {
			if viewOf(nd) != 90 {
				return false
			}
		}
		return true
	})
	return nodes, leader
}

// TestRollingReloadFollowerFirst moves "api" to strict on one follower
// while the leader still has it batched. The follower must answer from the
// fleet's 90, not from zero, and the others must see what it admits.
func TestRollingReloadFollowerFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node strict cluster")
	}
	nodes, leader := prepareRolling(t)
	var first []*testNode
	for _, nd := range nodes {
		if nd != leader {
			first = append(first, nd)
		}
	}
	if err := first[0].Reload(context.Background(), rollingRules(true)); err != nil {
		t.Fatal(err)
	}
	got := admitN(t, first[0], 20)
	waitFor(t, patience, "the others to see what the reloaded node admitted", func() bool {
		return viewOf(leader) == int64(90+got) && viewOf(first[1]) == int64(90+got)
	})
	got += admitN(t, leader, 20) + admitN(t, first[1], 20)
	if got != 10 {
		t.Errorf("during the rolling reload the fleet admitted %d more, want the 10 left of 100", got)
	}
}

// TestRollingReloadLeaderFirst moves "api" to strict on the leader first:
// its log must count what the nodes still treating "api" as batched admit.
func TestRollingReloadLeaderFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node strict cluster")
	}
	nodes, leader := prepareRolling(t)
	if err := leader.Reload(context.Background(), rollingRules(true)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, patience, "the log to decide api", func() bool {
		return leader.group().fsm.hasRules(map[string]window.Rule{"api": rollingRules(true)[1]})
	})
	var other *testNode
	for _, nd := range nodes {
		if nd != leader {
			other = nd
			break
		}
	}
	got := admitN(t, other, 5)
	waitFor(t, patience, "the log to count the batched admissions", func() bool {
		c, _ := leader.strictCounts("api", "k")
		return c.Curr == int64(90+got)
	})
	got += admitN(t, leader, 20)
	if got != 10 {
		t.Errorf("during the rolling reload the fleet admitted %d more, want the 10 left of 100", got)
	}
}
