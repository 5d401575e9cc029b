package strict

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// failoverRules are the strict rules of a failover run.
func failoverRules() []window.Rule {
	return []window.Rule{
		// Near its limit: the linearizability check bites on it.
		{Name: "fo-sliding", Count: 50, Window: 2 * time.Second, Type: window.Sliding, SyncInterval: window.Strict},
		// Never full, one window for the whole test: it counts every
		// admission, for the check that none is lost or invented.
		{Name: "fo-total", Count: 1_000_000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict},
	}
}

// failover is what one failover run saw.
type failover struct {
	leader    *testNode   // the leader that was killed
	survivors []*testNode // the other two
	ops       []strictOp
	// elected is how long after the kill both survivors knew a new leader,
	// and recovered how long after it the first strict decision the new
	// leader made returned (on recoveredOn).
	elected, recovered time.Duration
	recoveredOn        string
}

// runStrictFailover starts a 3-node strict cluster, has 4 clients on each
// follower check continuously, kills the leader once 400 checks were
// decided, and stops the load once the new leader has decided 400.
func runStrictFailover(t testing.TB, rules []window.Rule, clock func() int64) failover {
	t.Helper()
	nodes := startStrictCluster(t, 3, rules, clock, nil)
	var fo failover
	fo.leader = waitStrictGroup(t, nodes, patience)
	for _, nd := range nodes {
		if nd != fo.leader {
			fo.survivors = append(fo.survivors, nd)
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
	t.Logf("load seed %d; killing the leader %s", seed, fo.leader.Name())
	load := strictLoad{
		nodes: fo.survivors, perNode: 4, clock: clock, seed: seed,
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
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		fo.ops = load.run()
	}()
	defer func() {
		stopping.Store(true)
		<-loadDone
	}()

	waitFor(t, patience, "strict decisions before the kill", func() bool { return strictDone.Load() >= settle })
	// Watch before the kill, so no change of leader goes unseen.
	watch := watchLeaders(t, fo.survivors...)
	killAt := clock()
	fo.leader.Kill()
	killed.Store(clock())
	t.Logf("Kill took %v", time.Duration(killed.Load()-killAt).Round(time.Millisecond))

	watch.await(t, patience, "both survivors know a new leader", func(l string) bool { return l != "" && l != fo.leader.Name() })
	fo.elected = time.Duration(clock() - killAt)
	waitFor(t, patience, "strict decisions from the new leader", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return sinceKill >= afterward
	})
	stopping.Store(true)
	<-loadDone

	mu.Lock()
	fo.recovered, fo.recoveredOn = time.Duration(recovered.ret-killAt), recovered.node
	mu.Unlock()
	return fo
}

// TestStrictFailover kills the leader of the strict group while the other
// two nodes check continuously. A new leader must serve strict decisions,
// no admission a client saw may be lost, none may be counted that no check
// asked for, and the whole history must stay linearizable. How soon the
// new leader serves is BenchmarkStrictFailover's figure.
func TestStrictFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster under load and kills its leader")
	}
	rules := failoverRules()
	clock := sharedClock(time.Hour)
	fo := runStrictFailover(t, rules, clock)
	survivors, ops := fo.survivors, fo.ops
	t.Logf("failover: both survivors knew a new leader %v after the kill; the first strict decision from it returned %v after the kill (on %s)",
		fo.elected.Round(time.Millisecond), fo.recovered.Round(time.Millisecond), fo.recoveredOn)

	tally := tallyStrict(ops)
	t.Logf("history: %d checks: %v", len(ops), tally)
	if tally.errors > 0 {
		t.Errorf("%d checks failed with errors other than an unknown outcome: %q", tally.errors, tally.firstErrs)
	}
	checkDecisionTimes(t, ops)

	// Let the survivors apply everything the new leader appended.
	var newLeader *testNode
	waitFor(t, patience, "the survivors to apply the whole log", func() bool {
		newLeader = nil
		for _, nd := range survivors {
			if nd.isStrictLeader() {
				newLeader = nd
			}
		}
		if newLeader == nil {
			return false
		}
		last := newLeader.group().raft.LastIndex()
		for _, nd := range survivors {
			if nd.strictApplied() != last || len(nd.group().lead) > 0 || len(nd.group().fwd) > 0 {
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

	res, took := checkStrictHistory(t, rules, ops, horizon, patience, porcupine.Ok)
	t.Logf("porcupine: %s in %v (%d unknown outcomes modelled as maybe-applied)", res, took.Round(time.Millisecond), tally.unknown)
	if res != porcupine.Ok {
		t.Errorf("history across the failover is %s, want Ok (linearizable)", res)
	}
}

// BenchmarkStrictFailover measures how soon strict checks succeed again
// after the leader of a 3-node group dies under load: elected-ms, until both
// survivors know a new leader, and recovered-ms, until the first strict
// decision from it returns (within 3 s on an idle machine). Each iteration
// starts a cluster:
//
//	go test -run x -bench StrictFailover -benchtime 5x ./cluster
func BenchmarkStrictFailover(b *testing.B) {
	var elected, recovered time.Duration
	n := 0
	for b.Loop() {
		fo := runStrictFailover(b, failoverRules(), sharedClock(time.Hour))
		elected += fo.elected
		recovered += fo.recovered
		n++
		for _, nd := range fo.survivors {
			nd.Close() // now, not when the benchmark ends
		}
	}
	b.ReportMetric(float64(elected)/float64(n)/float64(time.Millisecond), "elected-ms")
	b.ReportMetric(float64(recovered)/float64(n)/float64(time.Millisecond), "recovered-ms")
}

// checkNoAdmissionLost compares each survivor's state machine with what the
// clients saw: every hit a strict decision admitted is counted, and at most
// the hits of checks with unknown outcomes are counted besides.
func checkNoAdmissionLost(t *testing.T, rules []window.Rule, survivors []*testNode, ops []strictOp) {
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

// failModeRules are one strict rule per fail_mode.
func failModeRules() []window.Rule {
	return []window.Rule{
		{Name: "fm-closed", Count: 10, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed},
		{Name: "fm-open", Count: 10, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailOpen},
		{Name: "fm-local", Count: 10, Window: time.Hour, Type: window.Sliding, SyncInterval: window.Strict, FailMode: window.FailLocal},
	}
}

// startLoneSurvivor starts a 3-node strict group of rules, checks that
// every rule decides through the log with quorum, then kills the leader
// and one follower and returns the other follower and the dead leader. With
// settled, it returns once the survivor knows no leader; otherwise at once,
// while it may still believe the dead leader leads.
func startLoneSurvivor(t testing.TB, rules []window.Rule, settled bool) (survivor, leader *testNode) {
	t.Helper()
	nodes := startStrictCluster(t, 3, rules, sharedClock(time.Hour), nil)
	leader = waitStrictGroup(t, nodes, patience)
	// With quorum, every rule decides through the log, whatever its mode. A
	// check a slow machine let fail over is asked again.
	for _, r := range rules {
		var d cluster.Decision
		var err error
		waitFor(t, patience, r.Name+" decides through the log", func() bool {
			d, err = nodes[0].Allow(context.Background(), r.Name, "warm", 1)
			return err != nil || d.Path == window.PathStrict
		})
		if err != nil || !d.Allowed {
			t.Fatalf("%s with quorum: %+v, %v; want a strict admission", r.Name, d, err)
		}
	}
	for _, nd := range nodes {
		if nd != leader {
			survivor = nd
			break
		}
	}
	watch := watchLeaders(t, survivor)
	// Keep a follower; kill the leader and the other follower.
	for _, nd := range nodes {
		if nd != survivor {
			nd.Kill()
		}
	}
	if settled {
		// Without quorum the survivor's election never ends: it knows no
		// leader.
		watch.await(t, patience, "the survivor to know no leader", func(l string) bool { return l == "" })
	}
	return survivor, leader
}

// TestStrictFailModes kills two of three nodes and checks on the survivor,
// which has no quorum: each strict rule answers by its fail_mode within the
// check's deadline. How soon is BenchmarkStrictFailMode's figure.
func TestStrictFailModes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster and kills two nodes")
	}
	rules := failModeRules()
	survivor, _ := startLoneSurvivor(t, rules, true)
	checkFailModes(t, survivor, rules)
}

// failModeDeadline is the deadline of the checks a node without a leader
// answers by fail_mode. The answer is due by then; what it takes is not
// asserted. It is long enough for a check forwarded to a dead leader to
// learn that the call could not connect (and so appended nothing) before
// the deadline, however slow the machine: at 150 ms, one run in a few on
// an idle machine saw the deadline pass first and reported an unknown
// outcome.
const failModeDeadline = 2 * time.Second

// checkFailModes checks each rule 25 times, concurrently, on a node that
// reaches no leader, with a deadline of failModeDeadline.
func checkFailModes(t *testing.T, survivor *testNode, rules []window.Rule) {
	t.Helper()
	before := survivor.Metrics().StrictFailovers
	const checks = 25 // per rule, past the local count of 10
	type result struct {
		rule string
		d    cluster.Decision
		err  error
		took time.Duration
	}
	results := make(chan result, 3*checks)
	var wg sync.WaitGroup
	for _, r := range rules {
		for range checks {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), failModeDeadline)
				defer cancel()
				start := time.Now()
				d, err := survivor.Allow(ctx, r.Name, "acct", 1)
				results <- result{r.Name, d, err, time.Since(start)}
			})
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
	t.Logf("%d checks per rule answered without quorum in at most %v (deadline %v)", checks, slowest.Round(time.Millisecond), failModeDeadline)
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
	if got := survivor.Metrics().StrictFailovers - before; got != 3*checks {
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
	rules := failModeRules()
	survivor, leader := startLoneSurvivor(t, rules, false)
	// A call already on its way over the dead leader's connection cannot
	// know whether it was appended: wait until the connection is seen down,
	// as it is for every check after the first moments.
	waitFor(t, patience, "the survivor sees the leader's connection down", func() bool {
		p := survivor.peerNamed(leader.Name())
		return p.Conn == nil || p.Conn.GetState() != connectivity.Ready
	})
	if survivor.strictLeaderName() != leader.Name() {
		t.Skip("the survivor noticed the leader's death before the checks; nothing to show")
	}
	checkFailModes(t, survivor, rules)
}

// BenchmarkStrictFailMode measures how soon a node that knows no leader
// answers a strict check with a 150 ms deadline by its fail_mode:
// answer-ms, and answer/deadline, at most 1 when the answer comes by the
// deadline.
//
//	go test -run x -bench StrictFailMode ./cluster
func BenchmarkStrictFailMode(b *testing.B) {
	const deadline = 150 * time.Millisecond
	rules := failModeRules()[:1]
	survivor, _ := startLoneSurvivor(b, rules, true)
	var took time.Duration
	n := 0
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		d, err := survivor.Allow(ctx, rules[0].Name, "acct", 1)
		took += time.Since(start)
		n++
		cancel()
		if err != nil || d.Path != window.PathFailClosed {
			b.Fatalf("without quorum: %+v, %v; want an answer by the fail mode", d, err)
		}
	}
	mean := took / time.Duration(n)
	b.ReportMetric(float64(mean)/float64(time.Millisecond), "answer-ms")
	b.ReportMetric(float64(mean)/float64(deadline), "answer/deadline")
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
	leader := waitStrictGroup(t, nodes, patience)
	var followers []*testNode
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
	waitFor(t, patience, "checks under way", func() bool { return done.Load() >= 300 })
	killed := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(killed)
		leader.Kill()
	}()
	// A Kill that hangs is the failure; how long one takes is only logged.
	select {
	case <-killed:
		t.Logf("Kill returned after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(patience):
		t.Fatalf("Kill of the strict leader did not return within %v", patience)
	}
}
