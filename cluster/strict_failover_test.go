package cluster

import (
	"context"
	"google.golang.org/grpc/connectivity"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/window"
)

// TestStrictFailover kills the leader of the strict group while the other
// two nodes check continuously. A new leader must serve strict decisions
// within 3 s, no admission a client saw may be lost, none may be counted
// that no check asked for, and the whole history must stay linearizable.
func TestStrictFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster under load and kills its leader")
	}
	rules := []window.Rule{
		// Near its limit: the linearizability check bites on it.
		{Name: "fo-sliding", Count: 50, Window: 2 * time.Second, Type: window.Sliding, SyncInterval: window.Strict},
		// Never full, one window for the whole test: it counts every
		// admission, for the check that none is lost or invented.
		{Name: "fo-total", Count: 1_000_000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict},
	}
	clock := sharedClock(time.Hour)
	nodes := startStrictCluster(t, 3, rules, clock, nil)
	leader := waitStrictGroup(t, nodes, 10*time.Second)
	var survivors []*Node
	for _, nd := range nodes {
		if nd != leader {
			survivors = append(survivors, nd)
		}
	}

	const settle = 400    // strict decisions before the kill
	const afterward = 400 // strict decisions the new leader makes before the load stops
	var (
		stopping   atomic.Bool
		strictDone atomic.Int64 // strict decisions returned so far
		killed     atomic.Int64 // clock when Kill returned; 0 before
		mu         sync.Mutex
		recovered  strictOp // the first strict decision stamped after the kill
		sinceKill  int      // strict decisions stamped after the kill
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("load seed %d; killing the leader %s", seed, leader.Name())
	load := strictLoad{
		nodes: survivors, perNode: 4, clock: clock, seed: seed,
		// Longer than an election, so a check rides over it rather than
		// fail over; a check cut off mid-flight returns an unknown outcome.
		opTimeout: 3 * time.Second,
		pick: func(rng *rand.Rand) (string, string, int64) {
			rule := rules[rng.IntN(len(rules))].Name
			key := []string{"a", "b", "c"}[rng.IntN(3)]
			return rule, key, 1 + int64(rng.IntN(10)/8) // mostly 1, sometimes 2
		},
		stop: stopping.Load,
		observe: func(op strictOp) {
			if !op.strict() {
				return
			}
			strictDone.Add(1)
			if k := killed.Load(); k != 0 && op.at > k {
				mu.Lock()
				if sinceKill == 0 || op.ret < recovered.ret {
					recovered = op
				}
				sinceKill++
				mu.Unlock()
			}
		},
	}
	var ops []strictOp
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		ops = load.run()
	}()
	defer func() {
		stopping.Store(true)
		<-loadDone
	}()

	waitFor(t, 20*time.Second, "strict decisions before the kill", func() bool { return strictDone.Load() >= settle })
	killAt := clock()
	leader.Kill()
	killed.Store(clock())
	t.Logf("Kill took %v", time.Duration(killed.Load()-killAt).Round(time.Millisecond))

	var elected int64
	waitFor(t, 10*time.Second, "a new leader that both survivors know", func() bool {
		l := survivors[0].strictLeaderName()
		if l == "" || l == leader.Name() || survivors[1].strictLeaderName() != l {
			return false
		}
		elected = clock()
		return true
	})
	waitFor(t, 10*time.Second, "strict decisions from the new leader", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return sinceKill >= afterward
	})
	stopping.Store(true)
	<-loadDone

	mu.Lock()
	failover := time.Duration(recovered.ret - killAt)
	mu.Unlock()
	t.Logf("failover: both survivors know a new leader %v after the kill; first strict decision from it returned %v after the kill (on %s)",
		time.Duration(elected-killAt).Round(time.Millisecond), failover.Round(time.Millisecond), recovered.node)
	if failover > 3*time.Second {
		t.Errorf("strict checks succeeded again %v after the leader died, want within 3s", failover)
	}

	tally := tallyStrict(ops)
	t.Logf("history: %d checks: %v", len(ops), tally)
	if tally.errors > 0 {
		t.Errorf("%d checks failed with errors other than an unknown outcome: %q", tally.errors, tally.firstErrs)
	}
	checkDecisionTimes(t, ops)

	// Let the survivors apply everything the new leader appended.
	var newLeader *Node
	waitFor(t, 10*time.Second, "the survivors to apply the whole log", func() bool {
		newLeader = nil
		for _, nd := range survivors {
			if nd.isStrictLeader() {
				newLeader = nd
			}
		}
		if newLeader == nil {
			return false
		}
		last := newLeader.strictG.Load().raft.LastIndex()
		for _, nd := range survivors {
			if nd.strictApplied() != last || len(nd.strictG.Load().lead) > 0 || len(nd.strictG.Load().fwd) > 0 {
				return false
			}
		}
		return true
	})
	horizon := clock()

	// No check is applied twice: a check whose call to the dying leader
	// broke is reported as an unknown outcome, never retried. The log shows
	// every applied check; decisions no caller saw (those unknown outcomes
	// that did commit) join the history at their log time.
	hidden, twice := auditStrictLog(t, rules, newLeader, ops)
	if twice > 0 {
		t.Errorf("%d checks were applied twice across the failover", twice)
	}
	ops = append(ops, hidden...)

	checkNoAdmissionLost(t, rules, survivors, ops)

	res, took := checkStrictHistory(t, rules, ops, horizon, 30*time.Second, porcupine.Ok)
	t.Logf("porcupine: %s in %v (%d unknown outcomes modelled as maybe-applied)", res, took.Round(time.Millisecond), tally.unknown)
	if res != porcupine.Ok {
		t.Errorf("history across the failover is %s, want Ok (linearizable)", res)
	}
}

// checkNoAdmissionLost compares each survivor's state machine with what the
// clients saw: every hit a strict decision admitted is counted, and at most
// the hits of checks with unknown outcomes are counted besides.
func checkNoAdmissionLost(t *testing.T, rules []window.Rule, survivors []*Node, ops []strictOp) {
	t.Helper()
	type rk struct{ rule, key string }
	seen := map[rk]map[int64]int64{} // admitted hits by window
	maybe := map[rk]int64{}          // hits of unknown outcomes
	for _, op := range ops {
		k := rk{op.rule, op.key}
		switch {
		case op.strict() && op.d.Allowed && op.hits > 0:
			r := ruleNamed(rules, op.rule)
			if seen[k] == nil {
				seen[k] = map[int64]int64{}
			}
			seen[k][window.Index(op.at, r.Window)] += op.hits
		case op.unknown():
			maybe[k] += op.hits
		}
	}
	for _, nd := range survivors {
		for k, per := range seen {
			r := ruleNamed(rules, k.rule)
			c, now := nd.strictCounts(k.rule, k.key)
			idx := window.Index(now, r.Window)
			want := window.Counts{Prev: per[idx-1], Curr: per[idx]}
			if c.Curr < want.Curr || c.Prev < want.Prev {
				t.Errorf("%s %s/%s: state machine counts %+v, but clients saw %+v admitted: admissions lost", nd.Name(), k.rule, k.key, c, want)
			}
			if extra := c.Curr + c.Prev - want.Curr - want.Prev; extra > maybe[k] {
				t.Errorf("%s %s/%s: state machine counts %+v, clients saw %+v admitted and %d hits with unknown outcomes: %d hits counted that no check accounts for",
					nd.Name(), k.rule, k.key, c, want, maybe[k], extra-maybe[k])
			}
		}
	}
}

func ruleNamed(rules []window.Rule, name string) window.Rule {
	for _, r := range rules {
		if r.Name == name {
			return r
		}
	}
	panic("no rule " + name)
}

// TestStrictFailModes kills two of three nodes and checks on the survivor,
// which has no quorum: each strict rule answers by its fail_mode once the
// check's deadline passes.
func TestStrictFailModes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster and kills two nodes")
	}
	rules := []window.Rule{
		{Name: "fm-closed", Count: 10, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed},
		{Name: "fm-open", Count: 10, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailOpen},
		{Name: "fm-local", Count: 10, Window: time.Hour, Type: window.Sliding, SyncInterval: window.Strict, FailMode: window.FailLocal},
	}
	nodes := startStrictCluster(t, 3, rules, sharedClock(time.Hour), nil)
	leader := waitStrictGroup(t, nodes, 10*time.Second)
	// With quorum, every rule decides through the log, whatever its mode.
	for _, r := range rules {
		d, err := nodes[0].Allow(context.Background(), r.Name, "warm", 1)
		if err != nil || d.Path != window.PathStrict || !d.Allowed {
			t.Fatalf("%s with quorum: %+v, %v; want a strict admission", r.Name, d, err)
		}
	}
	// Keep a follower; kill the leader and the other follower.
	var survivor *Node
	for _, nd := range nodes {
		if nd != leader && survivor == nil {
			survivor = nd
			continue
		}
		nd.Kill()
	}
	// Without quorum the survivor's election never ends: it knows no leader.
	waitFor(t, 10*time.Second, "the survivor to know no leader", func() bool { return survivor.strictLeaderName() == "" })
	checkFailModes(t, survivor, rules)
}

// checkFailModes checks each rule 25 times, concurrently, on a node that
// reaches no leader, with a short deadline.
func checkFailModes(t *testing.T, survivor *Node, rules []window.Rule) {
	t.Helper()
	before := survivor.Metrics().StrictFailovers.Load()
	const checks = 25 // per rule, past the local count of 10
	type result struct {
		rule string
		d    window.Decision
		err  error
		took time.Duration
	}
	results := make(chan result, 3*checks)
	var wg sync.WaitGroup
	for _, r := range rules {
		for range checks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
				defer cancel()
				start := time.Now()
				d, err := survivor.Allow(ctx, r.Name, "acct", 1)
				results <- result{r.Name, d, err, time.Since(start)}
			}()
		}
	}
	wg.Wait()
	close(results)

	allowed := map[string]int{}
	var slowest time.Duration
	for res := range results {
		slowest = max(slowest, res.took)
		if res.err != nil {
			t.Errorf("%s without quorum: %v; want an answer by the fail mode", res.rule, res.err)
			continue
		}
		want := map[string]window.Path{"fm-closed": window.PathFailClosed, "fm-open": window.PathFailOpen, "fm-local": window.PathFailLocal}[res.rule]
		if res.d.Path != want {
			t.Errorf("%s without quorum: path %v, want %v", res.rule, res.d.Path, want)
		}
		if res.d.Allowed {
			allowed[res.rule]++
		}
	}
	t.Logf("%d checks per rule answered without quorum in at most %v", checks, slowest.Round(time.Millisecond))
	if got := allowed["fm-closed"]; got != 0 {
		t.Errorf("fail_mode closed admitted %d of %d, want none", got, checks)
	}
	if got := allowed["fm-open"]; got != checks {
		t.Errorf("fail_mode open admitted %d of %d, want all", got, checks)
	}
	// The survivor alone enforces the count, exactly, from its own empty
	// state: the strict counts are not in the local fallback.
	if got := allowed["fm-local"]; got != 10 {
		t.Errorf("fail_mode local admitted %d of %d, want exactly the count 10", got, checks)
	}
	if got := survivor.Metrics().StrictFailovers.Load() - before; got != 3*checks {
		t.Errorf("StrictFailovers grew by %d, want %d", got, 3*checks)
	}
}

// TestStrictFailModesRightAfterLeaderDies checks on the survivor right after
// the other two nodes died, while it still believes the dead leader leads:
// nothing can reach a leader, so each rule must answer by its fail mode, not
// with an unknown outcome: a call that could not connect appended nothing.
func TestStrictFailModesRightAfterLeaderDies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster and kills two nodes")
	}
	rules := []window.Rule{
		{Name: "fm-closed", Count: 10, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed},
		{Name: "fm-open", Count: 10, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailOpen},
		{Name: "fm-local", Count: 10, Window: time.Hour, Type: window.Sliding, SyncInterval: window.Strict, FailMode: window.FailLocal},
	}
	nodes := startStrictCluster(t, 3, rules, sharedClock(time.Hour), nil)
	leader := waitStrictGroup(t, nodes, 10*time.Second)
	var survivor *Node
	for _, nd := range nodes {
		if nd != leader && survivor == nil {
			survivor = nd
			continue
		}
		nd.Kill()
	}
	// A call already on its way over the dead leader's connection cannot
	// know whether it was appended: wait until the connection is seen down,
	// as it is for every check after the first moments.
	waitFor(t, 5*time.Second, "the survivor sees the leader's connection down", func() bool {
		p := survivor.peers.byName(leader.Name())
		return p == nil || p.conn.GetState() != connectivity.Ready
	})
	if survivor.strictLeaderName() != leader.Name() {
		t.Skip("the survivor noticed the leader's death before the checks; nothing to show")
	}
	checkFailModes(t, survivor, rules)
}

// TestStrictKillLeaderUnderLoad kills the leader while followers forward
// checks to it: Kill must return, answering the checks still queued for its
// batcher as never appended.
func TestStrictKillLeaderUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster under load and kills its leader")
	}
	rules := []window.Rule{{Name: "kill", Count: 1_000_000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}}
	clock := sharedClock(time.Hour)
	nodes := startStrictCluster(t, 3, rules, clock, nil)
	leader := waitStrictGroup(t, nodes, 10*time.Second)
	var followers []*Node
	for _, nd := range nodes {
		if nd != leader {
			followers = append(followers, nd)
		}
	}
	var stopping atomic.Bool
	var done atomic.Int64
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		strictLoad{
			nodes: followers, perNode: 4, clock: clock, opTimeout: 3 * time.Second, seed: 1,
			pick:    func(*rand.Rand) (string, string, int64) { return "kill", "k", 1 },
			stop:    stopping.Load,
			observe: func(strictOp) { done.Add(1) },
		}.run()
	}()
	defer func() {
		stopping.Store(true)
		<-loadDone
	}()
	waitFor(t, 20*time.Second, "checks under way", func() bool { return done.Load() >= 300 })
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		leader.Kill()
	}()
	select {
	case <-killed:
	case <-time.After(5 * time.Second):
		t.Fatal("Kill of the strict leader did not return within 5s")
	}
}
