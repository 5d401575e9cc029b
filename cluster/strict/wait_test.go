package strict

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/cluster"
)

// patience bounds what a test waits for. Nothing a test waits on takes
// more than a few seconds on an idle machine; the bound only turns a hang
// into a failure, so it is far past what the race detector and other
// packages' tests on two busy cores make of those seconds.
const patience = time.Minute

// waitFor polls cond until it holds, or fails the test once within has
// passed. It is for conditions nothing signals (metrics, views, the clock);
// leadership is observed through a leaderWatch instead.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // the poll interval
	}
}

// freshBootstrapWait is the StrictBootstrapWait of fleets tests start
// together: none of their members can have forgotten a strict group.
const freshBootstrapWait = 100 * time.Millisecond

// patientStrict is a Config tweak for tests that check what the strict log
// decides: a check waits for the log as long as a test waits for anything,
// rather than fail over after the default second when the machine is slow.
func patientStrict(c *cluster.Config) { c.StrictTimeout = patience }

// patient is patientStrict that also waits for a batched key's owner as
// long: a test that counts exactly must not have a loaded machine's late
// answer refuse a check the owner would have granted.
func patient(c *cluster.Config) {
	patientStrict(c)
	c.BorrowTimeout = patience
}

// leaderWatch follows which leader each of a set of nodes knows: it wakes
// on their Raft observers' leader observations, so a test waits on
// leadership changes as they happen instead of polling for them.
type leaderWatch struct {
	nodes  []*testNode
	events chan raft.Observation
}

// watchLeaders starts following the leaders nodes know; the observers are
// removed when the test ends.
func watchLeaders(t testing.TB, nodes ...*testNode) *leaderWatch {
	t.Helper()
	w := &leaderWatch{nodes: nodes, events: make(chan raft.Observation, 256)}
	only := func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}
	for _, nd := range nodes {
		r := nd.group().raft
		// Not blocking, so a test that stops reading never stalls Raft; the
		// buffer holds far more changes than a test makes unread.
		o := raft.NewObserver(w.events, false, only)
		r.RegisterObserver(o)
		t.Cleanup(func() { r.DeregisterObserver(o) })
	}
	return w
}

// await waits until every watched node knows the same leader and ok holds
// for it ("" when they know none), and returns that leader; it fails the
// test once within has passed. It reads what each node knows when it starts
// and after each observation, so a change before it was called counts.
func (w *leaderWatch) await(t testing.TB, within time.Duration, what string, ok func(leader string) bool) string {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		known := map[string]string{}
		for _, nd := range w.nodes {
			known[nd.Name()] = nd.strictLeaderName()
		}
		leader := known[w.nodes[0].Name()]
		agreed := true
		for _, l := range known {
			agreed = agreed && l == leader
		}
		if agreed && ok(leader) {
			return leader
		}
		select {
		case <-w.events:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting until %s; the nodes know the leaders %v", within, what, known)
		}
	}
}
