package counter

import (
	"fmt"
	"sort"

	"github.com/sluicehq/sluice/window"
)

// reportsTo turns entries due to other nodes (reports to keys' owners,
// copies to their standbys, settled counts to contributors) into one delta
// per destination and kind, appended to out; the caller holds r.mu.
func (r *Replica) reportsTo(rs []routed, out []Outbound) []Outbound {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].to != rs[j].to {
			return rs[i].to < rs[j].to
		}
		if rs[i].kind != rs[j].kind {
			return rs[i].kind < rs[j].kind
		}
		return rs[i].rule < rs[j].rule
	})
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j].to == rs[i].to && rs[j].kind == rs[i].kind {
			j++
		}
		if to := r.reg.inc(rs[i].to); rs[i].to != r.selfID {
			out = append(out, Outbound{To: to, Delta: r.reportDelta(rs[i:j])})
		}
		i = j
	}
	return out
}

// reportDelta builds one delta from entries due to the same node, of the
// same kind, sorted by rule; the caller holds r.mu.
func (r *Replica) reportDelta(rs []routed) *Delta {
	r.seq++
	d := &Delta{From: r.self, Seq: r.seq, Kind: KindReport, Incarnations: []Incarnation{r.self}, Live: int(r.live)}
	if len(rs) > 0 {
		d.Kind = rs[0].kind
	}
	local := map[uint32]uint32{r.selfID: 0}
	for _, x := range rs {
		li, ok := local[x.inc]
		if !ok {
			li = uint32(len(d.Incarnations))
			local[x.inc] = li
			d.Incarnations = append(d.Incarnations, r.reg.inc(x.inc))
		}
		e := x.e
		e.Inc = li
		if n := len(d.Rules); n == 0 || d.Rules[n-1].Rule != x.rule {
			d.Rules = append(d.Rules, RuleDelta{Rule: x.rule})
		}
		rd := &d.Rules[len(d.Rules)-1]
		rd.Entries = append(rd.Entries, e)
	}
	return d
}

// Decide is Allow for a node that can ask keys' owners: a check on a key
// whose owner must be asked (its grant here is spent while the fleet may
// have room) is left undecided, and ask is the question to send to the
// owner. Once the owner's answer is merged with Receive, Settle decides the
// check; if no answer comes, Settle with answered false decides it from
// this node's view. For other rules Decide is Allow.
func (r *Replica) Decide(now int64, rule, key string, hits int64) (d window.Decision, ask *Outbound, err error) {
	t := (*r.tables.Load())[rule]
	if t == nil {
		return d, nil, fmt.Errorf("%w %q", ErrUnknownRule, rule)
	}
	if err := t.check(key, hits); err != nil {
		return d, nil, err
	}
	d, asked := t.try(key, now, hits, askOwner)
	d.At = now
	if !asked {
		return d, nil, nil
	}
	q, ok := t.question(key, now, hits)
	if !ok {
		// The owner left between the decision and the question.
		d, _ = t.try(key, now, hits, askLost)
		d.At = now
		return d, nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return d, &Outbound{To: r.reg.inc(q.to), Delta: r.reportDelta([]routed{q})}, nil
}

// Outcome says what became of the question Decide asked a key's owner.
type Outcome uint8

const (
	// Answered: the owner's answer was merged; the check is decided
	// within the grant it brought, or refused.
	Answered Outcome = iota
	// Late: no answer came in time from an owner that is not known to be
	// gone (a slow or lossy link): the check is refused, since the owner
	// may hand the room this node sees to others meanwhile.
	Late
	// Lost: the owner has been silent for long: the check is decided from
	// this node's view, within its share of what the fleet had left when
	// it last heard, until membership moves the key to its standby.
	Lost
)

// Settle decides a check Decide left undecided, as outcome says.
func (r *Replica) Settle(now int64, rule, key string, hits int64, outcome Outcome) (window.Decision, error) {
	t := (*r.tables.Load())[rule]
	if t == nil {
		return window.Decision{}, fmt.Errorf("%w %q", ErrUnknownRule, rule)
	}
	how := askLost
	switch outcome {
	case Answered:
		how = askAnswered
	case Late:
		how = askLate
	}
	d, _ := t.try(key, now, hits, how)
	d.At = now
	return d, nil
}

// question is the report that asks key's owner for hits.
func (t *Table) question(key string, now, hits int64) (routed, bool) {
	idx := window.Index(now, t.rule.Window)
	sh := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(key, idx, false)
	if s == nil || s.o == nil || !t.owns() {
		return routed{}, false
	}
	o := t.lease(s)
	if o.owner == t.self {
		return routed{}, false
	}
	return routed{to: o.owner, inc: t.self, kind: KindReport, rule: t.rule.Name, e: o.reportEntry(s, hits)}, true
}
