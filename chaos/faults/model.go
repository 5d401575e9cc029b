package faults

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// A porcupine model of strict mode, the one cluster's own tests check
// histories with: every strict check is one step of a sequential rate
// limiter, applied at the time the leader stamped on its log entry. A
// check whose outcome is unknown (cluster.ErrOutcomeUnknown) may or may not
// have been decided by the log, at any time after its call. So may every
// answer by fail_mode: a check that gives up on the leader to answer within
// its deadline may already be on its way into the log, and the caller is
// not told which.
//
// An admission by fail_mode local is counted on its node, and the leader
// later merges those counts into the log: the hit then lands in the window
// the node counted it in, whether or not it fits (a merge, not a
// decision), or nowhere if that window has passed. So such an admission
// either never reaches the log, or is merged, or is decided by the log (it
// was on its way to the leader when its node gave up waiting), or both:
// the log cannot tell its own decision of a check from the node's fail-local
// count of the same check, so it may count it twice. That errs on the side
// of refusing, never of admitting more than the count. The decision and the
// merge happen at different moments (the log may decide the check while
// its node still waits, and merge the node's count much later), so the
// history holds them as two operations: the check, with an unknown outcome,
// and its merge.

// strictIn is a check's input; call bounds when an unknown outcome could
// have been decided. merge marks not a check but the merge into the log of
// an admission by fail_mode local, made at localAt on its node's clock.
type strictIn struct {
	rule, key string
	hits      int64
	call      int64
	merge     bool
	localAt   int64
}

// strictOut is a check's output: a decision (its Path cleared) and when the
// log made it, or unknown.
type strictOut struct {
	unknown bool
	d       window.Decision
}

// strictState is one (rule, key)'s state: counts of window idx (curr) and
// the one before (prev), and the time of the last decision.
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
// one returned. An unknown outcome may not have been applied, or have been
// admitted at a time from its call to horizon, in any window where it fits.
// A merge may not have happened, or have counted in the admission's own
// window, or as the previous one in the next (see above).
func strictStep(rules map[string]window.Rule, horizon int64, s strictState, in strictIn, out strictOut) []strictState {
	r := rules[in.rule]
	if !out.unknown {
		at := out.d.At
		if at < s.last {
			return nil
		}
		s = s.roll(window.Index(at, r.Window))
		d := r.Decide(s.counts(), at, in.hits)
		d.At = at
		if d != out.d {
			return nil
		}
		if d.Allowed && in.hits > 0 {
			s.curr += in.hits
		}
		s.last = at
		return []strictState{s}
	}
	next := []strictState{s}
	if in.hits == 0 {
		return next
	}
	from := max(s.last, in.call)
	if in.merge {
		// It counts in its own window, as prev in the next, and not at
		// all later.
		own := window.Index(in.localAt, r.Window)
		for w := max(window.Index(from, r.Window), own); w <= own+1 && window.Start(w, r.Window) <= horizon; w++ {
			s2 := s.roll(w)
			if w == own {
				s2.curr += in.hits
			} else {
				s2.prev += in.hits
			}
			s2.last = max(from, window.Start(w, r.Window))
			next = append(next, s2)
		}
		return next
	}
	for w := max(window.Index(from, r.Window), s.idx); window.Start(w, r.Window) <= horizon; w++ {
		lo := max(from, window.Start(w, r.Window))
		hi := min(window.Start(w+1, r.Window)-1, horizon)
		s2 := s.roll(w)
		// Prev only decays within a window: if the hits fit at any
		// moment of it, they fit at its last one.
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
	if i.merge {
		return fmt.Sprintf("%s/%s +%d → merged (fail-local at %d)", i.rule, i.key, i.hits, i.localAt)
	}
	if o.unknown {
		return fmt.Sprintf("%s/%s +%d → unknown", i.rule, i.key, i.hits)
	}
	return fmt.Sprintf("%s/%s +%d → allowed=%v remaining=%d at %d", i.rule, i.key, i.hits, o.d.Allowed, o.d.Remaining, o.d.At)
}

func describeStrictState(s any) string {
	st := s.(strictState)
	return fmt.Sprintf("w%d prev=%d curr=%d last=%d", st.idx, st.prev, st.curr, st.last)
}

func strictModel(rules map[string]window.Rule, horizon int64) porcupine.Model {
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

// IsStrict reports whether r is a decision of the strict log.
func IsStrict(r Record) bool { return r.Err == nil && r.D.Path == window.PathStrict }

// IsUnknown reports whether r's outcome is unknown: it may have been
// applied.
func IsUnknown(r Record) bool { return errors.Is(r.Err, cluster.ErrOutcomeUnknown) }

// MaybeApplied reports whether r may have reached the log's counts without
// the log's decision reaching the caller: an unknown outcome, or any answer
// by fail_mode (see the model above).
func MaybeApplied(r Record) bool {
	return IsUnknown(r) || r.Err == nil && r.D.Path != window.PathStrict && r.D.Path != window.PathLocal
}

// mergeClient offsets the client of a merge operation from its check's, so
// that porcupine's picture shows merges apart.
const mergeClient = 1 << 20

// strictHistory turns the strict decisions and unknown outcomes among recs
// into porcupine operations.
func strictHistory(rules map[string]window.Rule, recs []Record) (history []porcupine.Operation, strict, unknown int) {
	for _, r := range recs {
		if _, ok := rules[r.Rule]; !ok {
			continue
		}
		in := strictIn{rule: r.Rule, key: r.Key, hits: r.Hits, call: r.Call}
		if r.Err == nil && r.D.Path == window.PathFailLocal && r.D.Allowed {
			// A merge comes after the admission, and lands in its window
			// or the next, or nowhere: bounding it so keeps the search
			// small. (Strict scenarios run unskewed: the node's clock is
			// the history's.)
			merge := in
			merge.merge, merge.localAt, merge.call = true, r.D.At, max(r.Call, r.D.At)
			w := rules[r.Rule].Window
			done := window.Start(window.Index(r.D.At, w)+2, w)
			history = append(history, porcupine.Operation{ClientId: mergeClient + r.Worker, Input: merge, Call: merge.call,
				Output: strictOut{unknown: true}, Return: max(done, merge.call)})
		}
		switch {
		case IsStrict(r):
			strict++
			d := r.D
			d.Path = 0
			history = append(history, porcupine.Operation{ClientId: r.Worker, Input: in, Call: r.Call,
				Output: strictOut{d: d}, Return: r.Ret})
		case MaybeApplied(r):
			unknown++
			history = append(history, porcupine.Operation{ClientId: r.Worker, Input: in, Call: r.Call,
				Output: strictOut{unknown: true}, Return: math.MaxInt64})
		}
	}
	return history, strict, unknown
}

// Linearizability is the verdict on a history of strict checks.
type Linearizability struct {
	Result porcupine.CheckResult
	// Strict decisions, and Unknown: checks that may have been applied
	// (unknown outcomes and fail-mode answers).
	Strict, Unknown int
	Took            time.Duration
	// Visualization is an HTML file showing an illegal history, if one was
	// written.
	Visualization string
}

// CheckLinearizable checks that the strict decisions among recs, for the
// strict rules among rules, form a linearizable history of exact rate
// limiters; horizon is a time after every check. Every node's clock must be
// the switchboard's, unskewed, so that call, return and decision times
// compare.
func CheckLinearizable(rules []window.Rule, recs []Record, horizon int64, timeout time.Duration) Linearizability {
	byName := map[string]window.Rule{}
	for _, r := range rules {
		if r.IsStrict() {
			byName[r.Name] = r
		}
	}
	history, strict, unknown := strictHistory(byName, recs)
	model := strictModel(byName, horizon)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, timeout)
	v := Linearizability{Result: res, Strict: strict, Unknown: unknown, Took: time.Since(start)}
	if res == porcupine.Illegal {
		if dir, err := os.MkdirTemp("", "sluice-chaos-porcupine-"); err == nil {
			path := filepath.Join(dir, "history.html")
			if porcupine.VisualizePath(model, info, path) == nil {
				v.Visualization = path
			}
		}
	}
	return v
}

// IllegalKeys checks the strict history of every (rule, key) on its own and
// returns those whose history is not linearizable, as "rule/key": where to
// look when the whole history is not.
func IllegalKeys(rules []window.Rule, recs []Record, horizon int64, timeout time.Duration) []string {
	type rk struct{ rule, key string }
	by := map[rk][]Record{}
	var order []rk
	for _, r := range recs {
		k := rk{r.Rule, r.Key}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	var bad []string
	for _, k := range order {
		if v := CheckLinearizable(rules, by[k], horizon, timeout); v.Result == porcupine.Illegal {
			bad = append(bad, k.rule+"/"+k.key)
		}
	}
	return bad
}

// DescribeHistory lists the checks of rule/key among recs, in call order,
// relative to start: one line each, for a failure message.
func DescribeHistory(recs []Record, rule, key string, start int64) string {
	var b strings.Builder
	ms := func(t int64) float64 { return float64(t-start) / 1e6 }
	for _, r := range recs {
		if r.Rule != rule || r.Key != key {
			continue
		}
		fmt.Fprintf(&b, "  %s#%04x w%d call %.1f ret %.1f: ", r.Node, r.Boot%0x10000, r.Worker, ms(r.Call), ms(r.Ret))
		if r.Err != nil {
			fmt.Fprintf(&b, "error %v\n", r.Err)
			continue
		}
		fmt.Fprintf(&b, "%v allowed=%v remaining=%d at %.1f\n", r.D.Path, r.D.Allowed, r.D.Remaining, ms(r.D.At))
	}
	return b.String()
}
