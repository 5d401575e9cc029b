package strict

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/window"
)

// A porcupine model of strict mode: every strict check is one step of a
// sequential rate limiter, applied at the time the leader stamped on its log
// entry. The state of a (rule, key) partition is its counts in the window of
// the last decision and the one before, and the time of that decision:
// decision times never run back along the log, so they must not along a
// linearization either.

// strictOp is one check of a recorded history. call and ret are readings of
// the clock every node of the test shares, taken just before the check and
// just after it returned; at is the log's time of a strict decision.
type strictOp struct {
	client    int
	node      string
	rule, key string
	hits      int64
	call, ret int64
	d         window.Decision
	at        int64
	err       error
}

func (op strictOp) strict() bool  { return op.err == nil && op.d.Path == window.PathStrict }
func (op strictOp) unknown() bool { return errors.Is(op.err, strictapi.ErrOutcomeUnknown) }

// strictIn is a check's input; call bounds when an unknown outcome could
// have been decided.
type strictIn struct {
	rule, key string
	hits      int64
	call      int64
}

// strictOut is a check's output: a decision (its Path cleared) and when the
// log made it, or unknown.
type strictOut struct {
	unknown bool
	d       window.Decision
	at      int64
}

// strictState is one partition's state: counts of window idx (curr) and the
// one before (prev), and the time of the last decision.
type strictState struct {
	idx, prev, curr, last int64
}

func (s strictState) roll(idx int64) strictState {
	switch {
	case idx == s.idx+1:
		s.prev, s.curr = s.curr, 0
	case idx > s.idx+1:
		s.prev, s.curr = 0, 0
	case idx < s.idx:
		panic(fmt.Sprintf("model rolled back from window %d to %d", s.idx, idx))
	}
	s.idx = idx
	return s
}

func (s strictState) counts() window.Counts { return window.Counts{Prev: s.prev, Curr: s.curr} }

// strictStep returns the states a check can lead to from s. A known outcome
// leads to at most one: the rule's decision at the log's time must be the
// one the check returned. An unknown outcome may not have been applied at
// all (or been refused, which changes no count), or have been admitted at a
// time from its call to horizon, in any window where it fits at some moment;
// the next decision may then come no earlier than the first such moment.
func strictStep(rules map[string]window.Rule, horizon int64, s strictState, in strictIn, out strictOut) []strictState {
	r := rules[in.rule]
	if !out.unknown {
		if out.at < s.last {
			return nil
		}
		s = s.roll(window.Index(out.at, r.Window))
		d := r.Decide(s.counts(), out.at, in.hits)
		if d != out.d {
			return nil
		}
		if d.Allowed && in.hits > 0 {
			s.curr += in.hits
		}
		s.last = out.at
		return []strictState{s}
	}
	next := []strictState{s}
	if in.hits == 0 {
		return next
	}
	from := max(s.last, in.call)
	for w := window.Index(from, r.Window); window.Start(w, r.Window) <= horizon; w++ {
		lo := max(from, window.Start(w, r.Window))
		hi := min(window.Start(w+1, r.Window)-1, horizon)
		s2 := s.roll(w)
		// Prev only decays within a window: if the hits fit at any moment
		// of it, they fit at its last one.
		if lo <= hi && r.Fits(s2.counts(), hi, in.hits) {
			s2.curr += in.hits
			s2.last = lo
			next = append(next, s2)
		}
	}
	return next
}

func strictPartition(history []porcupine.Operation) [][]porcupine.Operation {
	by := map[[2]string][]porcupine.Operation{}
	var order [][2]string
	for _, op := range history {
		in := op.Input.(strictIn)
		k := [2]string{in.rule, in.key}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(order))
	for _, k := range order {
		out = append(out, by[k])
	}
	return out
}

func hashStrictState(s strictState) uint64 {
	h := uint64(14695981039346656037)
	for _, v := range [...]int64{s.idx, s.prev, s.curr, s.last} {
		h ^= uint64(v)
		h *= 1099511628211
	}
	return h
}

func describeStrictOp(in, out any) string {
	i, o := in.(strictIn), out.(strictOut)
	if o.unknown {
		return fmt.Sprintf("%s/%s +%d → unknown", i.rule, i.key, i.hits)
	}
	return fmt.Sprintf("%s/%s +%d → allowed=%v remaining=%d at %d", i.rule, i.key, i.hits, o.d.Allowed, o.d.Remaining, o.at)
}

func describeStrictState(s any) string {
	st := s.(strictState)
	return fmt.Sprintf("w%d prev=%d curr=%d last=%d", st.idx, st.prev, st.curr, st.last)
}

// strictModel is the model of rules; horizon is a time after every check of
// the history (it bounds when unknown outcomes could have been decided).
// A history without unknown outcomes gets a deterministic model.
func strictModel(rules map[string]window.Rule, horizon int64, withUnknown bool) porcupine.Model {
	if !withUnknown {
		return porcupine.Model{
			Partition: strictPartition,
			Init:      func() any { return strictState{} },
			Step: func(s, in, out any) (bool, any) {
				next := strictStep(rules, horizon, s.(strictState), in.(strictIn), out.(strictOut))
				if len(next) == 0 {
					return false, s
				}
				return true, next[0]
			},
			Hash:              func(s any) uint64 { return hashStrictState(s.(strictState)) },
			DescribeOperation: describeStrictOp,
			DescribeState:     describeStrictState,
		}
	}
	nm := porcupine.NondeterministicModel{
		Partition: strictPartition,
		Init:      func() []any { return []any{strictState{}} },
		Step: func(s, in, out any) []any {
			next := strictStep(rules, horizon, s.(strictState), in.(strictIn), out.(strictOut))
			states := make([]any, len(next))
			for i, st := range next {
				states[i] = st
			}
			return states
		},
		Hash:              func(s any) uint64 { return hashStrictState(s.(strictState)) },
		DescribeOperation: describeStrictOp,
		DescribeState:     describeStrictState,
	}
	return nm.ToModel()
}

// strictHistory turns strict decisions and unknown outcomes into porcupine
// operations; other answers (fail modes, errors) are not checks the log
// decided and are left out. An unknown outcome may take effect at any time
// after its call, so it never returns.
func strictHistory(ops []strictOp) (history []porcupine.Operation, unknown int) {
	for _, op := range ops {
		in := strictIn{rule: op.rule, key: op.key, hits: op.hits, call: op.call}
		switch {
		case op.strict():
			d := op.d
			d.Path = 0
			history = append(history, porcupine.Operation{ClientId: op.client, Input: in, Call: op.call,
				Output: strictOut{d: d, at: op.at}, Return: op.ret})
		case op.unknown():
			unknown++
			history = append(history, porcupine.Operation{ClientId: op.client, Input: in, Call: op.call,
				Output: strictOut{unknown: true}, Return: math.MaxInt64})
		}
	}
	return history, unknown
}

// checkStrictHistory runs porcupine over ops and returns its verdict and
// how long it took. An unexpected verdict leaves a visualization behind.
func checkStrictHistory(t *testing.T, rules []window.Rule, ops []strictOp, horizon int64, timeout time.Duration, want porcupine.CheckResult) (porcupine.CheckResult, time.Duration) {
	t.Helper()
	byName := map[string]window.Rule{}
	for _, r := range rules {
		byName[r.Name] = r
	}
	history, unknown := strictHistory(ops)
	model := strictModel(byName, horizon, unknown > 0)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, timeout)
	took := time.Since(start)
	if res != want {
		dir, err := os.MkdirTemp("", "sluice-porcupine-")
		if err == nil {
			path := filepath.Join(dir, "history.html")
			if err := porcupine.VisualizePath(model, info, path); err == nil {
				t.Logf("porcupine visualization: %s", path)
			}
		}
	}
	return res, took
}

// sharedClock returns a monotonic clock in Unix nanoseconds that every node
// of a test and the test itself read, so call and return times compare with
// the log's times exactly. Its windows of length align start at its zero.
func sharedClock(align time.Duration) func() int64 {
	start := time.Now()
	base := window.Start(window.Index(start.UnixNano(), align)+1, align)
	return func() int64 { return base + int64(time.Since(start)) }
}

// strictLoad drives concurrent checks and records their history.
type strictLoad struct {
	nodes     []*testNode // the nodes clients call, perNode clients each
	perNode   int
	clock     func() int64
	opTimeout time.Duration
	seed      uint64
	// pick chooses a check; stop says when a client should stop; observe,
	// if set, sees each check as it returns.
	pick    func(rng *rand.Rand) (rule, key string, hits int64)
	stop    func() bool
	observe func(op strictOp)
}

func (l strictLoad) run() []strictOp {
	var mu sync.Mutex
	var all []strictOp
	var wg sync.WaitGroup
	for i, nd := range l.nodes {
		for c := range l.perNode {
			client := i*l.perNode + c
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(l.seed, uint64(client)))
				var ops []strictOp
				for !l.stop() {
					rule, key, hits := l.pick(rng)
					op := strictOp{client: client, node: nd.Name(), rule: rule, key: key, hits: hits}
					ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout)
					op.call = l.clock()
					op.d, op.at, op.err = nd.allowAt(ctx, rule, key, hits)
					op.ret = l.clock()
					cancel()
					if l.observe != nil {
						l.observe(op)
					}
					ops = append(ops, op)
				}
				mu.Lock()
				all = append(all, ops...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i].call < all[j].call })
	return all
}

// strictTally summarises a history.
type strictTally struct {
	strict, allowed, unknown, failOpen, failClosed, failLocal, errors int
	firstErrs                                                         []string
}

func tallyStrict(ops []strictOp) strictTally {
	var s strictTally
	for _, op := range ops {
		switch {
		case op.strict():
			s.strict++
			if op.d.Allowed {
				s.allowed++
			}
		case op.unknown():
			s.unknown++
		case op.err != nil:
			s.errors++
			if len(s.firstErrs) < 5 {
				s.firstErrs = append(s.firstErrs, fmt.Sprintf("%s %s/%s: %v", op.node, op.rule, op.key, op.err))
			}
		case op.d.Path == window.PathFailOpen:
			s.failOpen++
		case op.d.Path == window.PathFailClosed:
			s.failClosed++
		case op.d.Path == window.PathFailLocal:
			s.failLocal++
		default:
			s.errors++
			if len(s.firstErrs) < 5 {
				s.firstErrs = append(s.firstErrs, fmt.Sprintf("%s %s/%s: unexpected path %v", op.node, op.rule, op.key, op.d.Path))
			}
		}
	}
	return s
}

func (s strictTally) String() string {
	return fmt.Sprintf("%d strict (%d allowed), %d unknown, fail-open %d, fail-closed %d, fail-local %d, errors %d",
		s.strict, s.allowed, s.unknown, s.failOpen, s.failClosed, s.failLocal, s.errors)
}

// checkDecisionTimes reports strict decisions whose log time falls outside
// the check's call and return: the leader stamps an entry after the check
// reached it, and the log's time never runs back.
func checkDecisionTimes(t *testing.T, ops []strictOp) {
	t.Helper()
	bad := 0
	for _, op := range ops {
		if op.strict() && (op.at < op.call || op.at > op.ret) {
			if bad < 5 {
				t.Errorf("%s %s/%s: decided at %d, outside its call [%d, %d]", op.node, op.rule, op.key, op.at, op.call, op.ret)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d strict decisions were stamped outside their call", bad)
	}
}

// auditStrictLog replays node's strict log through a fresh state machine,
// checks that the replay ends with the node's counts for every (rule, key)
// of ops, and returns the applications of checks the log holds more than
// once, all but the last of each: decisions no caller saw, as operations
// stamped at their log time, and how many checks were applied twice or
// more. A check is appended again when a forwarding node retries it after
// an error it takes for "never appended".
func auditStrictLog(t *testing.T, rules []window.Rule, node *testNode, ops []strictOp) (hidden []strictOp, twice int) {
	t.Helper()
	logs, err := node.strictLog()
	if err != nil {
		t.Fatalf("reading the strict log: %v", err)
	}
	applied, fsm, err := replayStrictLog(rules, logs)
	if err != nil {
		t.Fatalf("replaying the strict log: %v", err)
	}
	type rk struct{ rule, key string }
	keys := map[rk]bool{}
	for _, op := range ops {
		keys[rk{op.rule, op.key}] = true
	}
	for k := range keys {
		got, _ := node.strictCounts(k.rule, k.key)
		if want := fsm.counts(k.rule, k.key); got != want {
			t.Errorf("%s %s/%s: counts %+v, but replaying its log gives %+v", node.Name(), k.rule, k.key, got, want)
		}
	}
	last := map[uint64]int{}
	for i, a := range applied {
		last[a.id] = i
	}
	counted := map[uint64]bool{}
	for i, a := range applied {
		if last[a.id] == i {
			continue
		}
		if !counted[a.id] {
			counted[a.id] = true
			twice++
		}
		op := a.op
		op.client, op.node = 999, "(lost reply)"
		op.call, op.ret = op.at, op.at
		hidden = append(hidden, op)
	}
	return hidden, twice
}

// TestStrictModel checks the model on small hand-made histories, so that a
// verdict on a real one means something.
func TestStrictModel(t *testing.T) {
	const ms = int64(time.Millisecond)
	fixed := window.Rule{Name: "f", Count: 2, Window: time.Second, Type: window.Fixed, SyncInterval: window.Strict}
	sliding := window.Rule{Name: "s", Count: 2, Window: time.Second, Type: window.Sliding, SyncInterval: window.Strict}
	fixed5 := window.Rule{Name: "f5", Count: 5, Window: time.Second, Type: window.Fixed, SyncInterval: window.Strict}
	rules := []window.Rule{fixed, sliding, fixed5}
	base := 1_000 * int64(time.Second) // a window boundary
	// check decides hits at at with the rule on counts c: a correct output.
	check := func(r window.Rule, c window.Counts, at, hits int64, call, ret int64) strictOp {
		d := r.Decide(c, base+at*ms, hits)
		d.Path = window.PathStrict
		return strictOp{rule: r.Name, key: "k", hits: hits, d: d, at: base + at*ms, call: base + call*ms, ret: base + ret*ms}
	}
	unknown := func(r window.Rule, hits, call int64) strictOp {
		return strictOp{rule: r.Name, key: "k", hits: hits, call: base + call*ms, err: strictapi.ErrOutcomeUnknown}
	}
	tests := []struct {
		name string
		ops  []strictOp
		want porcupine.CheckResult
	}{
		{"sequential", []strictOp{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			check(fixed, window.Counts{Curr: 1}, 20, 1, 16, 25),
			check(fixed, window.Counts{Curr: 2}, 30, 1, 26, 35),
		}, porcupine.Ok},
		{"concurrent, any order the times allow", []strictOp{
			check(fixed, window.Counts{Curr: 1}, 20, 1, 5, 25),
			check(fixed, window.Counts{}, 20, 1, 5, 25),
		}, porcupine.Ok},
		{"over-admission", []strictOp{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			check(fixed, window.Counts{Curr: 1}, 20, 1, 16, 25),
			check(fixed, window.Counts{Curr: 1}, 30, 1, 26, 35), // admitted a third hit
		}, porcupine.Illegal},
		{"decision time runs back", []strictOp{
			check(fixed, window.Counts{}, 20, 1, 5, 25),
			check(fixed, window.Counts{Curr: 1}, 10, 1, 26, 35),
		}, porcupine.Illegal},
		{"reset at the boundary", []strictOp{
			check(fixed, window.Counts{}, 10, 2, 5, 15),
			check(fixed, window.Counts{Curr: 2}, 990, 1, 980, 995),
			check(fixed, window.Counts{Prev: 2}, 1010, 1, 1000, 1020),
		}, porcupine.Ok},
		{"sliding decay", []strictOp{
			check(sliding, window.Counts{}, 900, 2, 890, 905),
			check(sliding, window.Counts{Prev: 2}, 1400, 1, 1300, 1450), // held 2×0.6 → 2: refused
			check(sliding, window.Counts{Prev: 2}, 1600, 1, 1500, 1650), // held 2×0.4 → 1: admitted
		}, porcupine.Ok},
		{"sliding without decay", []strictOp{
			check(sliding, window.Counts{}, 900, 2, 890, 905),
			check(sliding, window.Counts{}, 1400, 1, 1300, 1450), // as if prev had gone
		}, porcupine.Illegal},
		{"an unknown outcome that must have been admitted", []strictOp{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			unknown(fixed, 1, 16),
			check(fixed, window.Counts{Curr: 2}, 30, 1, 26, 35),
		}, porcupine.Ok},
		{"an unknown outcome that may not have been applied", []strictOp{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			unknown(fixed, 1, 16),
			check(fixed, window.Counts{Curr: 1}, 30, 1, 26, 35),
		}, porcupine.Ok},
		{"an unknown outcome admitted in a later window", []strictOp{
			check(sliding, window.Counts{}, 10, 1, 5, 15),
			unknown(sliding, 1, 16),
			check(sliding, window.Counts{Prev: 1, Curr: 1}, 1005, 1, 1001, 1010),
		}, porcupine.Ok},
		{"an unknown outcome cannot explain two", []strictOp{
			check(fixed5, window.Counts{}, 10, 1, 5, 15),
			unknown(fixed5, 1, 16),
			check(fixed5, window.Counts{Curr: 3}, 30, 0, 26, 35),
		}, porcupine.Illegal},
		{"an unknown outcome takes effect after its call", []strictOp{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			check(fixed, window.Counts{Curr: 2}, 20, 0, 16, 25),
			unknown(fixed, 1, 40),
		}, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := checkStrictHistory(t, rules, tt.ops, base+10*int64(time.Second), 10*time.Second, tt.want)
			if res != tt.want {
				t.Errorf("porcupine says %s, want %s", res, tt.want)
			}
		})
	}
}
