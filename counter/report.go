package counter

import (
	"github.com/sluicehq/sluice/window"
)

// owns reports whether the table's keys have owners: a batched rule with
// owner allocation on a node that has peers.
func (t *Table) owns() bool {
	return t.rule.Allocation == window.Owner && !t.rule.IsStrict() && t.live.Load() > 1 && t.fleet.Load() != nil
}

// lease returns the key's owner-allocation state, working out its owner
// again if the fleet changed; the shard is locked.
func (t *Table) lease(s *slot) *owned {
	if s.o == nil {
		s.o = &owned{}
	}
	o := s.o
	f := t.fleet.Load()
	if o.gen != f.gen {
		owner := f.ownerOf(s.key)
		if o.gen != 0 && owner != o.owner {
			o.moved = true
		}
		o.owner, o.gen = owner, f.gen
		if owner == t.self && o.book == nil {
			o.book = &book{}
		}
	}
	return o
}

// routed is an entry due to a key's owner: the owner's registry id, and the
// incarnation (registry id) the counts are of.
type routed struct {
	to, inc uint32
	rule    string
	e       Entry
}

// roundOwned is one pass over an owner-allocated table at this node's sync
// round: it expires old keys, hands books of keys this node no longer owns
// to their owners, and collects a report of every key that was asked for
// in the last two intervals, changed at or after epoch since, moved, or
// holds a grant it may give back.
func (t *Table) roundOwned(now int64, since uint64, out []routed) []routed {
	t.eachKept(window.Index(now, t.rule.Window), func(s *slot) {
		o := t.lease(s)
		o.need, o.demand = o.demand, 0
		if o.owner == t.self {
			return
		}
		if b := o.book; b != nil {
			// Ownership moved away: the new owner gets every count this
			// node held for others.
			for _, a := range b.accts {
				for p := range 2 {
					if a.adm[p] > 0 {
						out = append(out, routed{to: o.owner, inc: a.inc, rule: t.rule.Name,
							e: Entry{Key: s.key, Window: s.idx - 1 + int64(p), Admitted: a.adm[p]}})
					}
				}
			}
			o.book = nil
			o.moved = true
		}
		if o.moved || o.unacked || o.need > 0 || o.grant.base > s.own[1] || o.grant.rate > 0 || s.ver[1] >= since || s.ver[0] >= since {
			out = append(out, routed{to: o.owner, inc: t.self, rule: t.rule.Name, e: o.reportEntry(s, 0)})
			o.moved, o.unacked = false, false
		}
	})
	t.fwdMu.Lock()
	for _, f := range t.fwd {
		out = append(out, f)
	}
	t.fwd = t.fwd[:0]
	t.fwdMu.Unlock()
	return out
}

// mergeForeign folds counts of incarnation inc that arrived outside a
// report (a snapshot, or a peer syncing with everyone): into the book if
// this node owns the key, else passed on to its owner at the next round.
func (t *Table) mergeForeign(inc uint32, e *Entry, now int64, booked bool) bool {
	if inc == t.self || e.Admitted < 0 || e.Admitted > maxEntry {
		return false
	}
	sh, s, p := t.slotFor(e.Key, e.Window, now)
	if s == nil {
		return false
	}
	defer sh.mu.Unlock()
	o := t.lease(s)
	if o.owner != t.self && !booked {
		t.fwdMu.Lock()
		t.fwd = append(t.fwd, routed{to: o.owner, inc: inc, rule: t.rule.Name, e: Entry{Key: s.key, Window: e.Window, Admitted: e.Admitted}})
		t.fwdMu.Unlock()
		return true
	}
	if o.book == nil {
		o.book = &book{}
	}
	a := o.book.account(inc)
	a.adm[p] = max(a.adm[p], e.Admitted)
	return true
}

// report folds a report entry from incarnation inc into the key's book and
// returns the owner's answer. A node that does not own the key by its own
// view answers all the same: the sender sees it as owner, and the book
// passes to the owner at this node's next round.
func (t *Table) report(inc uint32, e *Entry, now int64, seq uint64) (Entry, bool) {
	if inc == t.self || !validReport(e) {
		return Entry{}, false
	}
	idx, elapsed := window.Position(now, t.rule.Window)
	sh, s, _ := t.slotFor(e.Key, e.Window, now)
	if s == nil {
		return Entry{}, false
	}
	defer sh.mu.Unlock()
	if s.idx > idx {
		// The sender's clock is a window ahead: fold its counts, but
		// grant from no window this node has not reached.
		elapsed = 0
	}
	o := t.lease(s)
	if o.book == nil {
		o.book = &book{}
	}
	return t.answer(s, inc, e, seq, t.clockOf(s, elapsed))
}

func validReport(e *Entry) bool {
	for _, v := range []int64{e.Admitted, e.Prev, e.Grant, e.Rate, e.Need, e.Ask} {
		if v < 0 || v > maxEntry {
			return false
		}
	}
	return true
}

// applyAnswer folds an owner's answer into the key's lease.
func (t *Table) applyAnswer(e *Entry, now int64) bool {
	for _, v := range []int64{e.Admitted, e.Prev, e.Grant, e.Rate, e.Next} {
		if v < 0 || v > maxEntry {
			return false
		}
	}
	sh, s, _ := t.slotFor(e.Key, e.Window, now)
	if s == nil {
		return false
	}
	defer sh.mu.Unlock()
	t.lease(s).applyAnswer(s, e)
	return true
}
