package strict

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// linearRules are two strict rules whose windows roll a few times during a
// run, so both the fixed reset and the sliding decay are exercised.
func linearRules() []window.Rule {
	return []window.Rule{
		{Name: "lin-sliding", Count: 60, Window: 2 * time.Second, Type: window.Sliding, SyncInterval: window.Strict},
		{Name: "lin-fixed", Count: 40, Window: 1500 * time.Millisecond, Type: window.Fixed, SyncInterval: window.Strict},
	}
}

// pickLinear chooses a rule, one of five keys with skewed demand (whatever
// the machine's speed, some keys sit far past their limit and some near
// it), and mostly one hit.
func pickLinear(rules []window.Rule) func(*rand.Rand) (string, string, int64) {
	return func(rng *rand.Rand) (string, string, int64) {
		rule := rules[rng.IntN(len(rules))].Name
		var key string
		switch p := rng.IntN(100); {
		case p < 55:
			key = "k0"
		case p < 80:
			key = "k1"
		case p < 92:
			key = "k2"
		case p < 98:
			key = "k3"
		default:
			key = "k4"
		}
		var hits int64
		switch p := rng.IntN(100); {
		case p < 3:
			hits = 0 // a peek
		case p < 85:
			hits = 1
		case p < 95:
			hits = 2
		default:
			hits = 3
		}
		return rule, key, hits
	}
}

// runLinear starts a 3-node cluster whose nodes are tweaked by tweak, runs
// at least checks checks from clients on every node, for at least 1.5
// windows of every rule, and returns the history and the Raft term the
// load started in.
func runLinear(t *testing.T, checks int64, tweak func(*cluster.Config)) (rules []window.Rule, nodes []*testNode, ops []strictOp, horizon int64, term int) {
	t.Helper()
	rules = linearRules()
	clock := sharedClock(time.Minute)
	// A check waits for the log as long as the test waits for anything:
	// on a slow machine a forwarded check must not time out into an
	// unknown outcome where the cluster is healthy.
	nodes = startStrictCluster(t, 3, rules, clock, func(c *cluster.Config) {
		patientStrict(c)
		if tweak != nil {
			tweak(c)
		}
	})
	waitStrictGroup(t, nodes, patience)
	term = currentTerm(nodes)

	var span time.Duration
	for _, r := range rules {
		span = max(span, r.Window*3/2)
	}
	var issued atomic.Int64
	seed := uint64(time.Now().UnixNano())
	t.Logf("load seed %d", seed)
	start := time.Now()
	ops = strictLoad{
		nodes: nodes, perNode: 6, clock: clock, opTimeout: patience, seed: seed,
		pick: pickLinear(rules),
		stop: func() bool { return issued.Add(1) > checks && time.Since(start) >= span },
	}.run()
	took := time.Since(start)
	t.Logf("%d checks from 18 clients on 3 nodes in %v (%.0f/s)", len(ops), took.Round(time.Millisecond),
		float64(len(ops))/took.Seconds())
	return rules, nodes, ops, clock(), term
}

// waitApplied waits until every node has applied the leader's whole log.
func waitApplied(t *testing.T, nodes []*testNode) {
	t.Helper()
	waitFor(t, patience, "every node to apply the whole strict log", func() bool {
		var leader *testNode
		for _, nd := range nodes {
			if nd.isStrictLeader() {
				leader = nd
			}
		}
		if leader == nil {
			return false
		}
		last := leader.group().raft.LastIndex()
		for _, nd := range nodes {
			if nd.strictApplied() != last {
				return false
			}
		}
		return true
	})
}

// TestStrictLinearizable is the acceptance test of strict mode's exactness:
// ≥ 10,000 concurrent checks on a sliding and a fixed rule, spread over a
// 3-node cluster, must form a linearizable history of a sequential rate
// limiter that decides each check at its entry's log time.
func TestStrictLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster under load")
	}
	rules, nodes, ops, horizon, term := runLinear(t, 10_000, nil)
	tally := tallyStrict(ops)
	t.Logf("history: %v", tally)
	// A healthy cluster decides every check through the log. A machine
	// starved for long enough (heartbeats are 500 ms) may see an election:
	// then checks cut off by it have unknown outcomes, which the model
	// handles, but nothing may fail.
	elections := currentTerm(nodes) - term
	switch {
	case tally.errors > 0 || tally.failOpen+tally.failClosed+tally.failLocal > 0:
		t.Errorf("only %d of %d checks were strict decisions: %v; first errors: %q", tally.strict, len(ops), tally, tally.firstErrs)
	case tally.unknown > 0 && elections <= 0:
		t.Errorf("%d checks had unknown outcomes in a healthy cluster", tally.unknown)
	case tally.unknown > 0:
		t.Logf("the cluster held %d elections under load; %d checks had unknown outcomes", elections, tally.unknown)
	}
	checkDecisionTimes(t, ops)
	if tally.allowed == 0 || tally.allowed == tally.strict {
		t.Errorf("%d of %d checks allowed: the keys were not near their limits", tally.allowed, tally.strict)
	}
	checkWindowsRolled(t, rules, ops)
	checkFixedNeverOver(t, rules, ops)

	// Every node's state machine is the replay of its log; a healthy
	// cluster applies each check once.
	waitApplied(t, nodes)
	var hidden []strictOp
	for _, nd := range nodes {
		h, twice := auditStrictLog(t, rules, nd, ops)
		if twice > 0 {
			t.Errorf("%s: %d checks applied more than once", nd.Name(), twice)
		}
		hidden = h
	}
	ops = append(ops, hidden...)

	res, took := checkStrictHistory(t, rules, ops, horizon, patience, porcupine.Ok)
	t.Logf("porcupine: %s in %v", res, took.Round(time.Millisecond))
	if res != porcupine.Ok {
		t.Errorf("history of %d strict checks is %s, want Ok (linearizable)", tally.strict, res)
	}
}

// currentTerm returns the highest Raft term the nodes know.
func currentTerm(nodes []*testNode) int {
	term := uint64(0)
	for _, nd := range nodes {
		term = max(term, nd.group().raft.CurrentTerm())
	}
	return int(term)
}

// TestStrictLinearizableCatchesOverAdmission runs the same load against a
// deliberately broken state machine that admits a few hits past the count:
// the checker must find the history illegal, or it checks nothing.
func TestStrictLinearizableCatchesOverAdmission(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster under load")
	}
	rules, _, ops, horizon, _ := runLinear(t, 3_000, func(c *cluster.Config) { c.Strict = Mode{overAdmit: 5} })
	tally := tallyStrict(ops)
	t.Logf("history: %v", tally)
	if tally.strict != len(ops) {
		t.Fatalf("only %d of %d checks were strict decisions: %v; first errors: %q", tally.strict, len(ops), tally, tally.firstErrs)
	}
	res, took := checkStrictHistory(t, rules, ops, horizon, patience, porcupine.Illegal)
	t.Logf("porcupine: %s in %v", res, took.Round(time.Millisecond))
	if res != porcupine.Illegal {
		t.Fatalf("history of a state machine that over-admits is %s, want Illegal", res)
	}
}

// checkWindowsRolled makes sure the run crossed window boundaries of every
// rule, so the history exercises resets and decay and not one window only.
func checkWindowsRolled(t *testing.T, rules []window.Rule, ops []strictOp) {
	t.Helper()
	for _, r := range rules {
		seen := map[int64]bool{}
		for _, op := range ops {
			if op.rule == r.Name && op.strict() {
				seen[window.Index(op.at, r.Window)] = true
			}
		}
		if len(seen) < 2 {
			t.Errorf("rule %s: every check fell in one window; the run is too short to roll windows", r.Name)
		}
	}
}

// checkFixedNeverOver is a direct check besides porcupine: a fixed window
// never admits more than its count.
func checkFixedNeverOver(t *testing.T, rules []window.Rule, ops []strictOp) {
	t.Helper()
	for _, r := range rules {
		if r.Type != window.Fixed {
			continue
		}
		per := map[string]int64{}
		for _, op := range ops {
			if op.rule == r.Name && op.strict() && op.d.Allowed {
				per[fmt.Sprintf("%s@%d", op.key, window.Index(op.at, r.Window))] += op.hits
			}
		}
		for k, n := range per {
			if n > r.Count {
				t.Errorf("rule %s: %s admitted %d hits, count %d", r.Name, k, n, r.Count)
			}
		}
	}
}
