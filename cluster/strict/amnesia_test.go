package strict

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// TestRestartedInMemoryVoterLosesNoAdmission kills the strict leader right
// after the log acknowledged admissions that only it and one follower hold,
// and restarts it without a data dir, so it has forgotten its log and its
// vote, while the follower that holds them is cut off. The follower that
// lacks them campaigns; the restarted node must not elect it. When the cut
// heals, the group must still count every acknowledged admission, and the
// restarted node must serve as a new voter in place of the one it was.
func TestRestartedInMemoryVoterLosesNoAdmission(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node strict cluster")
	}
	tr := startStrictTrio(t, fastGossip)
	rule, rules, clock, sn, nodes, leader := tr.rule, []window.Rule{tr.rule}, tr.clock, tr.sn, tr.nodes, tr.leader
	var holder, lacking *testNode // the followers that will and will not hold the admissions
	for _, nd := range nodes {
		switch {
		case nd == leader:
		case holder == nil:
			holder = nd
		default:
			lacking = nd
		}
	}

	sn.isolate(lacking.Name())
	const admitted = 5
	tr.admit(t, admitted)
	oldID := leader.group().id

	leader.Kill()
	sn.isolate(holder.Name())
	sn.release(lacking.Name())
	restarted, err := restartInMemory(t, sn, leader.Name(), rules, clock, holder, lacking)
	if err != nil {
		t.Fatal(err)
	}
	if id := restarted.group().id; id == oldID {
		t.Fatalf("the restarted node runs under its old server ID %q though it kept no log", id)
	}
	waitFor(t, patience, "the lacking follower sees the restarted node", func() bool {
		return lacking.hasPeer(string(restarted.group().id))
	})
	// Some elections' worth of time for the lacking follower to campaign
	// with the restarted node reachable. What is asserted does not depend
	// on it: a leader elected without the holder would lack the admissions.
	stayDown(6 * electionTimeout)

	sn.release(holder.Name())
	survivors := []*testNode{holder, lacking, restarted}
	newLeader := waitStrictGroup(t, survivors, patience)
	if got, _ := newLeader.strictCounts(rule.Name, "k"); got.Curr != admitted {
		t.Fatalf("the new leader %s counts %d admissions in the window; %d were acknowledged",
			newLeader.Name(), got.Curr, admitted)
	}
	d, err := restarted.Allow(context.Background(), rule.Name, "k", 1)
	if err != nil || !d.Allowed || d.Remaining != rule.Count-admitted-1 {
		t.Fatalf("a check after the restart: %+v, %v; want admitted with %d remaining", d, err, rule.Count-admitted-1)
	}
	cf := newLeader.group().raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == oldID {
			t.Errorf("the voter the restarted node was (%s) is still in the group: %v", oldID, cf.Configuration().Servers)
		}
	}
}

// restartInMemory starts a node named name again, without a data dir, on
// sn, joining the given members. It may run outside the test's goroutine.
func restartInMemory(t *testing.T, sn *stallNet, name string, rules []window.Rule, clock func() int64, join ...*testNode) (*testNode, error) {
	var seeds []string
	for _, nd := range join {
		seeds = append(seeds, nd.GossipAddr())
	}
	return restartOn(t, sn, name, "127.0.0.1:0", seeds, rules, clock, fastGossip)
}

// restartOn starts a node named name again, without a data dir, gossiping
// on bind and joining seeds.
func restartOn(t *testing.T, sn *stallNet, name, bind string, seeds []string, rules []window.Rule, clock func() int64,
	tune func(*memberlist.Config)) (*testNode, error) {
	cfg := cluster.Config{
		Name: name, Rules: rules, GRPCAddr: "127.0.0.1:0", BindAddr: bind, Join: seeds,
		JoinTimeout: 5 * time.Second, ShutdownTimeout: time.Second, Logger: testLogger(t), Now: clockOf(clock),
		Network: sn.node(name), StrictTimeout: patience, GossipTuning: tune,
	}
	nd, err := start(cfg)
	if err != nil {
		return nil, fmt.Errorf("restart %s: %w", name, err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd, nil
}

// TestInMemoryMajorityRestartRecovers kills both followers of a strict
// group without data dirs and restarts them at once, before the leader can
// replace either: the group they were voters of can never elect a leader
// again. The leader, the one voter left, must rebuild the group from its
// log, which holds every admission, and take the restarted nodes back in.
func TestInMemoryMajorityRestartRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node strict cluster")
	}
	tr := startStrictTrio(t, fastGossip)
	rule, rules, clock, sn, nodes, leader := tr.rule, []window.Rule{tr.rule}, tr.clock, tr.sn, tr.nodes, tr.leader
	const admitted = 7
	tr.admit(t, admitted)
	var followers []string
	for _, nd := range nodes {
		if nd != leader {
			nd.Kill()
			followers = append(followers, nd.Name())
		}
	}
	// At once: the leader must not get to replace either before both are back.
	restarted := make([]*testNode, len(followers))
	errs := make([]error, len(followers))
	var wg sync.WaitGroup
	for i, name := range followers {
		wg.Go(func() { restarted[i], errs[i] = restartInMemory(t, sn, name, rules, clock, leader) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	group := append([]*testNode{leader}, restarted...)
	newLeader := waitStrictGroup(t, group, patience)
	if got := leader.Metrics().StrictRecoveries; got != 1 {
		t.Errorf("the surviving voter rebuilt the group %d times; want once", got)
	}
	if got, _ := newLeader.strictCounts(rule.Name, "k"); got.Curr != admitted {
		t.Fatalf("the group counts %d admissions after the recovery; %d were acknowledged", got.Curr, admitted)
	}
	for _, nd := range group {
		d, err := nd.Allow(context.Background(), rule.Name, "k", 0)
		if err != nil || d.Path != window.PathStrict || d.Remaining != rule.Count-admitted {
			t.Errorf("%s after the recovery: %+v, %v; want %d remaining from the log", nd.Name(), d, err, rule.Count-admitted)
		}
	}
}

// strictTrio is a 3-node strict group without data dirs on a stallNet.
type strictTrio struct {
	rule   window.Rule // the group's one rule, 100 per hour fixed, fail closed
	clock  func() int64
	sn     *stallNet
	nodes  []*testNode
	leader *testNode
}

// startStrictTrio starts a trio whose gossip timings tune adjusts (nil:
// memberlist's).
func startStrictTrio(t *testing.T, tune func(*memberlist.Config)) strictTrio {
	t.Helper()
	tr := strictTrio{
		rule: window.Rule{Name: "s", Count: 100, Window: time.Hour, Type: window.Fixed,
			SyncInterval: window.Strict, FailMode: window.FailClosed},
		clock: sharedClock(time.Hour),
		sn:    newStallNet(),
	}
	t.Cleanup(tr.sn.heal)
	tr.nodes = startStrictCluster(t, 3, []window.Rule{tr.rule}, tr.clock, func(c *cluster.Config) {
		c.Network = tr.sn.node(c.Name)
		c.GossipTuning = tune
		patientStrict(c)
	})
	tr.leader = waitStrictGroup(t, tr.nodes, patience)
	return tr
}

// admit has the leader admit n hits of key "k", each acknowledged by the log.
func (tr strictTrio) admit(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		d, err := tr.leader.Allow(context.Background(), tr.rule.Name, "k", 1)
		if err != nil || !d.Allowed || d.Path != window.PathStrict {
			t.Fatalf("admission %d: %+v, %v; want admitted by the log", i, d, err)
		}
	}
}

// TestRestartedSeedsFindTheirGroup kills both followers of a strict group
// without data dirs and restarts them on their old gossip addresses: the
// seed with no seeds of its own, the other joining only the seed. The two
// see each other at once, and neither has a group; the leader, which holds
// every admission, still thinks both alive, for they answer its pings.
// They must not start a group of their own: the leader finds them
// restarted, rejoins them, rebuilds its group and takes them in.
func TestRestartedSeedsFindTheirGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node strict cluster")
	}
	// memberlist's own timings: a push-pull every 15 s would find the
	// restarted nodes too, but long after they could have started a group.
	tr := startStrictTrio(t, nil)
	const admitted = 9
	tr.admit(t, admitted)
	var downs []*testNode
	for _, nd := range tr.nodes {
		if nd != tr.leader {
			downs = append(downs, nd)
		}
	}
	seed, other := downs[0], downs[1]
	seedGossip, otherGossip := seed.GossipAddr(), other.GossipAddr()
	seed.Kill()
	other.Kill()
	rules := []window.Rule{tr.rule}
	seed2, err := restartOn(t, tr.sn, seed.Name(), seedGossip, nil, rules, tr.clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	other2, err := restartOn(t, tr.sn, other.Name(), otherGossip, []string{seedGossip}, rules, tr.clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	group := []*testNode{tr.leader, seed2, other2}
	newLeader := waitStrictGroup(t, group, patience)
	if got, _ := newLeader.strictCounts(tr.rule.Name, "k"); got.Curr != admitted {
		t.Fatalf("the group counts %d admissions; %d were acknowledged: the restarted nodes started a group of their own",
			got.Curr, admitted)
	}
	for _, nd := range []*testNode{seed2, other2} {
		if nd.Metrics().StrictRecoveries != 0 {
			t.Errorf("%s, restarted with no log, rebuilt a group", nd.Name())
		}
	}
}
