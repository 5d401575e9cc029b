package counter

import (
	"cmp"
	"slices"

	"github.com/sluicehq/sluice/window"
)

// reportsTo turns entries due to other nodes (reports to keys' owners,
// copies to their standbys, settled counts to contributors) into one delta
// per destination and kind, appended to out; the caller holds r.mu.
func (r *Replica) reportsTo(rs []routed, now int64, out []Outbound) []Outbound {
	// Sorted by index, not by moving the entries: a round may route many.
	order := slices.Grow(r.orderBuf[:0], len(rs))[:len(rs)]
	for i := range order {
		order[i] = int32(i)
	}
	// Entries keep their order within a destination and kind, which holds
	// each rule's together.
	slices.SortFunc(order, func(a, b int32) int {
		x, y := &rs[a], &rs[b]
		switch {
		case x.to != y.to:
			return cmp.Compare(x.to, y.to)
		case x.kind != y.kind:
			return cmp.Compare(x.kind, y.kind)
		}
		return cmp.Compare(a, b)
	})
	for i := 0; i < len(order); {
		first := &rs[order[i]]
		j := i
		for ; j < len(order) && rs[order[j]].to == first.to && rs[order[j]].kind == first.kind; j++ {
		}
		if to := r.reg.inc(first.to); first.to != r.selfID {
			d := r.groupDelta(rs, order[i:j])
			if d.Kind == KindReport {
				r.rtt.reported(first.to, d.Seq, now)
			}
			out = append(out, Outbound{To: to, Delta: d})
		}
		i = j
	}
	if cap(order) <= maxScratch {
		r.orderBuf = order[:0]
	} else {
		r.orderBuf = nil
	}
	return out
}

// reportDelta builds one delta from entries due to the same node, of the
// same kind, sorted by rule; the caller holds r.mu.
func (r *Replica) reportDelta(rs []routed) *Delta { return r.groupDelta(rs, nil) }

// groupDelta is reportDelta of the entries of rs at the indexes group, or
// of all of rs when group is nil.
func (r *Replica) groupDelta(rs []routed, group []int32) *Delta {
	n := len(group)
	if group == nil {
		n = len(rs)
	}
	at := func(k int) *routed {
		if group == nil {
			return &rs[k]
		}
		return &rs[group[k]]
	}
	r.seq++
	d := &Delta{From: r.self, Seq: r.seq, Kind: KindReport, Incarnations: []Incarnation{r.self}, Live: int(r.live)}
	if n > 0 {
		d.Kind = at(0).kind
	}
	// The incarnations' registry ids, by their index in d.Incarnations: a
	// delta names few.
	ids := []uint32{r.selfID}
	entries := make([]Entry, 0, n)
	start := 0
	for k := range n {
		x := at(k)
		li := slices.Index(ids, x.inc)
		if li < 0 {
			li = len(ids)
			ids = append(ids, x.inc)
			d.Incarnations = append(d.Incarnations, r.reg.inc(x.inc))
		}
		if k > 0 && at(k-1).rule != x.rule {
			d.Rules = append(d.Rules, RuleDelta{Rule: at(k - 1).rule, Entries: entries[start:len(entries):len(entries)]})
			start = len(entries)
		}
		e := x.e
		e.Inc = uint32(li)
		entries = append(entries, e)
	}
	if n > 0 {
		d.Rules = append(d.Rules, RuleDelta{Rule: at(n - 1).rule, Entries: entries[start:]})
	}
	return d
}

// Decide is Allow for a node that can ask keys' owners: a check on a key
// whose owner must be asked (its grant here is spent while the fleet may
// have room) is left undecided, and ask is the question to send to the
// owner. waiting is how many hits of other checks on the key wait at this
// node for the owner's answer: the question asks for room for them too, so
// that they need not each ask in turn, a round trip apiece. Once the
// owner's answer is merged with Receive, Settle decides the check; if no
// answer comes, Settle says how to decide it. For other rules Decide is
// Allow. Each call counts the hits as demand for the key: a check that
// waited on another check's question decides with DecideAgain. A non-nil
// tk is set to where a decided check's admitted hits were counted, for
// Refund; a caller that will not refund passes nil.
func (r *Replica) Decide(now int64, rule, key string, hits, waiting int64, tk *Ticket) (d window.Decision, ask *Outbound, err error) {
	return r.decide(now, rule, key, hits, waiting, askOwner, tk)
}

// DecideAgain is Decide for a check already counted as demand: one that
// waited for the answer to another check's question on the same key.
func (r *Replica) DecideAgain(now int64, rule, key string, hits, waiting int64, tk *Ticket) (d window.Decision, ask *Outbound, err error) {
	return r.decide(now, rule, key, hits, waiting, askAgain, tk)
}

func (r *Replica) decide(now int64, rule, key string, hits, waiting int64, how asking, tk *Ticket) (d window.Decision, ask *Outbound, err error) {
	t := (*r.tables.Load())[rule]
	if t == nil {
		return d, nil, UnknownRule(rule)
	}
	if err := t.check(key, hits); err != nil {
		return d, nil, err
	}
	d, asked, err := t.try(key, now, hits, how, tk)
	d.At = now
	if !asked || err != nil {
		return d, nil, err
	}
	q, ok := t.question(key, now, hits, waiting)
	if !ok {
		// The owner left between the decision and the question.
		d, _, err = t.try(key, now, hits, askLost, tk)
		d.At = now
		return d, nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	qd := r.reportDelta([]routed{q})
	r.rtt.reported(q.to, qd.Seq, now)
	return d, &Outbound{To: r.reg.inc(q.to), Delta: qd}, nil
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

// Settle decides a check Decide left undecided, as outcome says, setting a
// non-nil tk to where it counted the hits it admitted.
func (r *Replica) Settle(now int64, rule, key string, hits int64, outcome Outcome, tk *Ticket) (window.Decision, error) {
	t := (*r.tables.Load())[rule]
	if t == nil {
		return window.Decision{}, UnknownRule(rule)
	}
	how := askLost
	switch outcome {
	case Answered:
		how = askAnswered
	case Late:
		how = askLate
	}
	d, _, err := t.try(key, now, hits, how, tk)
	d.At = now
	return d, err
}

// question is the report that asks key's owner for hits, with waiting
// hits of other checks behind them counted in its need: the owner grants by
// need what it has room for, and counts as admitted only what is asked.
func (t *Table) question(key string, now, hits, waiting int64) (routed, bool) {
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(key, h)
	if s == nil || s.owned() == nil || !t.owns() {
		return routed{}, false
	}
	o := t.lease(s)
	if o.owner == t.self {
		return routed{}, false
	}
	e := t.reportEntry(s, hits)
	e.Need = max(e.Need, min(max(waiting, 0), maxEntry))
	return routed{to: o.owner, inc: t.self, kind: KindReport, rule: t.rule.Name, e: e}, true
}

// Renumber gives o, a delta this replica built, the next sequence number,
// and returns it. A receiver takes a delta numbered before one it already
// has for stale, and drops what it holds, a question to a key's owner
// too: a caller that builds deltas on several goroutines renumbers each
// while it holds whatever orders its sends, so that a peer receives them
// in the order of their numbers.
func (r *Replica) Renumber(o *Outbound, now int64) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	o.Delta.Seq = r.seq
	if o.Delta.Kind == KindReport {
		if id, ok := r.reg.lookup(o.To); ok {
			r.rtt.reported(id, r.seq, now)
		}
	}
	return r.seq
}
