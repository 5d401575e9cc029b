package counter

import (
	"math/bits"

	"github.com/sluicehq/sluice/window"
)

// Reason says why Receive rejected an entry of a delta.
type Reason uint8

const (
	// UnknownIncarnation is an entry of an incarnation other than the
	// delta's sender that this node has not heard of: not this node or an
	// earlier run of it, no peer that membership told it of, none that a
	// delta it took named. Peers pass on counts only of incarnations they
	// heard of; a node that has not heard of one (it was cut off while
	// that incarnation lived, or it is handed its own earlier run's counts
	// before its start-up pull is done) learns of it from state it asks
	// for (Origin.Asked), as Unheard tells it to.
	UnknownIncarnation Reason = iota
	// FutureWindow is an entry for a window more than one ahead of this
	// node's current one: its sender's clock is ahead by more than a
	// window, beyond any skew a fleet tolerates.
	FutureWindow
	// OverCount is an entry that says more than its incarnation could have
	// admitted (see Replica.ReceiveFrom).
	OverCount
	// NumReasons is how many reasons there are.
	NumReasons
)

// String returns the reason's name in snake case, as metrics label it.
func (r Reason) String() string {
	switch r {
	case UnknownIncarnation:
		return "unknown_incarnation"
	case FutureWindow:
		return "future_window"
	case OverCount:
		return "over_count"
	}
	return "unknown"
}

// Origin says what stands behind a delta, which decides what
// Replica.ReceiveFrom takes of it. The zero Origin is a peer's delta,
// unasked, from a peer that enforces the same rules as this node.
type Origin struct {
	// Asked says this node asked for the delta: its own saved state, the
	// state of a member it pulled from, its strict log's. Such state may
	// name incarnations this node has not heard of, which it learns, and
	// hold counts admitted under other rules than this node's (a node
	// started again with a lower count keeps what its earlier run
	// admitted), so it is held to no rule's count.
	Asked bool
	// OtherRules says the sender enforces other rules than this node's,
	// as during a rolling reload: it may admit up to a count this node
	// does not know, so its counts are held to the largest count a rule
	// may have (window.MaxCount) instead of to this node's.
	OtherRules bool
}

// noID marks, in a delta's incarnation ids, an incarnation Receive does not
// take entries of.
const noID = ^uint32(0)

// earlierCount is the highest count a rule had before a reload lowered it,
// and the last window (index) whose counts may have been admitted under
// it: a reload keeps the counts of a rule whose window is unchanged, so a
// peer's counts of those windows may exceed the rule's count now.
type earlierCount struct {
	count, through int64
}

// after is what e becomes when a reload at window idx replaces rule old by
// rule, keeping its counts.
func (e earlierCount) after(old, rule window.Rule, idx int64) earlierCount {
	if e.through < idx-1 {
		// Only windows that have expired were admitted under it.
		e = earlierCount{}
	}
	if old.Count > rule.Count {
		e = earlierCount{count: max(e.count, old.Count), through: max(e.through, idx)}
	}
	return e
}

// vetting is what Receive checks each entry of one delta against.
type vetting struct {
	now    int64
	origin Origin
	kind   Kind
	// ids are the registry ids of the delta's incarnations, noID for one
	// this node does not take entries of.
	ids []uint32
	// incs is how many incarnations this node knows of, itself included:
	// what the fleet admitted of a key in a window is at most the bound
	// for each.
	incs int64
}

// check returns why e, an entry of t's rule, is to be rejected and true,
// or false for an entry Receive may merge.
func (v *vetting) check(t *Table, e *Entry) (Reason, bool) {
	if v.ids[e.Inc] == noID {
		return UnknownIncarnation, true
	}
	idx := window.Index(v.now, t.rule.Window)
	if e.Window > idx+1 {
		return FutureWindow, true
	}
	if e.Window < idx-1 || v.origin.Asked {
		// An entry of an expired window is dropped as it is merged.
		return 0, false
	}
	if v.over(t, e) {
		return OverCount, true
	}
	return 0, false
}

// over reports whether e says more than could have been admitted. An
// incarnation's count of a key in a window is at most its bound (see
// Replica.ReceiveFrom). A report, a standby's copy, a full-mesh delta and a
// snapshot hold one incarnation's counts: Admitted in e's window, and Prev
// in the one before. An owner's answer holds what every incarnation but the
// receiver admitted. A grant (Grant, with its line's growth to the window's
// end, and Next for the window after) is at most the bound too: an owner
// grants only room the count has.
func (v *vetting) over(t *Table, e *Entry) bool {
	cur, prev := v.bound(t, e.Window), v.bound(t, e.Window-1)
	if e.Next > v.bound(t, e.Window+1) || grantEnd(t, e) > cur {
		return true
	}
	if v.kind == KindAnswer {
		return e.Admitted > times(cur, v.incs-1) || e.Prev > times(prev, v.incs-1)
	}
	if v.kind == KindView {
		return e.Admitted > times(cur, v.incs) || e.Prev > times(prev, v.incs)
	}
	return e.Admitted > cur || e.Prev > prev
}

// others is the most a view may say every incarnation but this node
// admitted of a key in window w: what restoreView takes from it, beside
// this node's own counts. A view is a sum of the counts its sender heard
// of, this node's included.
func (v *vetting) others(t *Table, w int64) int64 {
	if v.origin.Asked {
		return maxEntry
	}
	return times(v.bound(t, w), v.incs-1)
}

// bound is the most one incarnation can have admitted of a key in window w
// of t's rule, as a delta of v's origin may say.
func (v *vetting) bound(t *Table, w int64) int64 {
	if v.origin.OtherRules {
		return window.MaxCount
	}
	b := t.rule.Count
	if w <= t.earlier.through {
		b = max(b, t.earlier.count)
	}
	return b
}

// grantEnd is what the grant e carries comes to by the end of its window.
func grantEnd(t *Table, e *Entry) int64 {
	if e.Rate <= 0 {
		return e.Grant
	}
	w := t.rule.Window
	end := window.Start(e.Window+1, w)
	return line{base: e.Grant, rate: e.Rate, from: e.RateFrom, stop: e.RateUntil}.at(end, end, w)
}

// times is b × n, at most maxEntry.
func times(b, n int64) int64 {
	if b <= 0 || n <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(b), uint64(n))
	if hi != 0 || lo > uint64(maxEntry) {
		return maxEntry
	}
	return int64(lo)
}

// incarnationIDs returns the registry ids of d's incarnations: the sender's,
// one this node knows of, or, in state it asked for, any, which it learns;
// noID for the rest, whose entries it rejects. An incarnation it does not
// take is not registered, so that a delta naming many cannot grow the
// registry, nor raise the bound on what the fleet admitted.
func (r *Replica) incarnationIDs(d *Delta, fromID uint32, o Origin) []uint32 {
	ids := make([]uint32, len(d.Incarnations))
	for i, inc := range d.Incarnations {
		switch id, ok := r.reg.lookup(inc); {
		case inc == d.From:
			ids[i] = fromID
		case ok:
			ids[i] = id
		case o.Asked:
			ids[i] = r.reg.id(inc)
		default:
			ids[i] = noID
		}
	}
	return ids
}

// Unheard reports whether d names an incarnation other than its sender that
// this node has not heard of: Receive would reject that incarnation's
// entries, and ReceiveFrom a delta it asked for would learn of it.
func (r *Replica) Unheard(d *Delta) bool {
	for _, inc := range d.Incarnations {
		if inc == d.From {
			continue
		}
		if _, ok := r.reg.lookup(inc); !ok {
			return true
		}
	}
	return false
}
