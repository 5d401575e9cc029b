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
// and standby again if the fleet changed; the shard is locked.
func (t *Table) lease(s *slot) *owned {
	if s.o == nil {
		s.o = &owned{}
	}
	o := s.owned()
	f := t.fleet.Load()
	if o.gen == f.gen {
		if s.x != nil {
			t.adoptShared(s)
		}
		return o
	}
	if o.gen == 0 && s.own != [2]int64{} {
		// Counts made before the key had an owner (alone, or under
		// another policy): the owner hears them at the next round.
		o.moved = true
	}
	owner, standby := f.rank(s.key)
	if o.gen != 0 {
		if owner != o.owner {
			o.moved = true
			if x := o.ext; x != nil && (x.book != nil || x.heldFrom != 0) {
				// What this node held as the key's owner or standby goes
				// to the new owner at the next round: a restarted owner
				// is a new owner that has forgotten its book.
				o.handover = true
			}
		}
	}
	o.owner, o.gen = owner, f.gen
	if owner == t.self {
		o.handover = false
		b := o.ensureBook()
		if b.standby != standby {
			b.standby, o.standbyStale = standby, true
		}
		if x := o.ext; x.heldFrom != 0 {
			// Standby no more but owner: the owner's counts it kept
			// are its account now.
			o.accountOf(x.heldFrom)
		}
	}
	if s.x != nil {
		t.adoptShared(s)
	}
	return o
}

// adoptShared passes what the key's slot holds of other incarnations from
// before it had an owner (alone, under another policy, or while the rule
// was strict) into owner allocation, and drops it: booked here, and due to
// the key's owner at the next round if this node does not own it. Live
// nodes report their own counts to the owner anyway; this is how counts
// that no live node reports reach it, a strict log's handed back to the
// batched tables and those of nodes that have left, and it happens before
// the key's first decision under owner allocation, which would otherwise
// grant them again. The shard is locked and the key's owner worked out.
func (t *Table) adoptShared(s *slot) {
	x := s.x
	s.x = nil
	for i := range x.peers {
		p := &x.peers[i]
		if p.adm == [2]int64{} || p.inc == t.self {
			continue
		}
		e := Entry{Key: s.key, Window: s.idx, Admitted: p.adm[1], Prev: p.adm[0]}
		t.foreign(s, p.inc, &e)
	}
}

// hold keeps, on a key's standby, what the key's owner from says of its own
// counts; a copy from another owner than before first passes the earlier
// one into the book, as counts of the incarnation they are of.
func (t *Table) hold(from uint32, e *Entry, now int64) bool {
	if from == t.self || e.Admitted < 0 || e.Admitted > maxEntry || e.Prev < 0 || e.Prev > maxEntry {
		return false
	}
	sh, s, p := t.ownedSlot(e.Key, e.Window, now)
	if s == nil {
		return false
	}
	defer sh.mu.Unlock()
	o := t.lease(s)
	if o.owner == t.self {
		t.book(s, from, e)
		return true
	}
	if b := o.bookOf(); b != nil && b.has(from) {
		// The book already counts that incarnation: its copy goes there,
		// so that it is not counted twice.
		t.book(s, from, e)
		return true
	}
	x := o.extend()
	if x.heldFrom != from && x.heldFrom != 0 && x.held != [2]int64{} {
		o.accountOf(x.heldFrom)
	}
	x.heldFrom = from
	x.held[p] = max(x.held[p], e.Admitted)
	if p == 1 {
		x.held[0] = max(x.held[0], e.Prev)
	}
	return true
}

// routed is an entry due to another node: its registry id, the
// incarnation (registry id) the counts are of, and the kind of delta that
// carries it.
type routed struct {
	to, inc uint32
	kind    Kind
	rule    string
	e       Entry
}

// roundOwned is one pass over an owner-allocated table at this node's sync
// round: it expires old keys and collects what is due to other nodes. A
// key's owner sends its standby the counts only it knows, and tells the
// nodes that have not heard the counts of a key that has gone quiet. Every
// other node reports a key to its owner when it changed at or after epoch
// since, was asked for in the last interval, moved, or holds a grant it may
// give back, or left one unspent when its window closed; a node that owned
// the key before hands its book over.
func (t *Table) roundOwned(now int64, since uint64, out []routed) []routed {
	alive := t.alive()
	t.eachKept(window.Index(now, t.rule.Window), func(s *slot) {
		// Leasing adopts the counts peers sent everyone before the rule
		// had owners (adoptShared).
		o := t.lease(s)
		o.rotate()
		if o.owner == t.self {
			out = t.spread(s, since, alive, out)
			out = t.tellSettled(s, alive, out)
			return
		}
		if o.handover {
			// Ownership moved away, or counts of other incarnations came
			// here: the owner gets every count this node holds for others.
			x := o.ext
			if x.heldFrom != 0 && !alive(x.heldFrom) {
				// A copy of a dead owner's counts is the only one left.
				o.accountOf(x.heldFrom)
			}
			if b := x.book; b != nil {
				for _, a := range b.accts {
					out = append(out, routed{to: o.owner, inc: a.inc, kind: KindReport, rule: t.rule.Name,
						e: Entry{Key: s.key, Window: s.idx, Admitted: a.adm[1], Prev: a.adm[0]}})
				}
			}
			if x.heldFrom != 0 && x.heldFrom != o.owner {
				out = append(out, routed{to: o.owner, inc: x.heldFrom, kind: KindReport, rule: t.rule.Name,
					e: Entry{Key: s.key, Window: s.idx, Admitted: x.held[1], Prev: x.held[0]}})
			}
			x.held, x.heldFrom = [2]int64{}, 0
			if x.book != nil {
				// What no live node reports is kept, and sent again
				// whenever the owner changes or its stream breaks: the
				// report that carried it may be lost, or reach an owner
				// that restarts and forgets it. Live nodes report their
				// own counts to the new owner themselves.
				x.book.keep(func(a *account) bool { return !alive(a.inc) })
				if len(x.book.accts) == 0 {
					x.book = nil
				}
			}
			o.trim()
			// This node reports too, its own counts or none: the
			// answer tells it the fleet's counts, which it holds a
			// part of and would otherwise not hear while it does not
			// check the key itself.
			o.handover, o.moved = false, true
		}
		if o.moved || o.unacked || o.stranded || o.last > 0 || o.grant > s.own[1] || o.ext != nil && (o.ext.rate > 0 || o.ext.next > 0) || changedSince(s.ver[1], since) || changedSince(s.ver[0], since) {
			out = append(out, routed{to: o.owner, inc: t.self, kind: KindReport, rule: t.rule.Name, e: t.reportEntry(s, 0)})
			o.moved, o.unacked, o.stranded = false, false, false
		}
	})
	return out
}

// spread sends the key's standby, from its owner, what no other node would
// tell it: the owner's own counts, when they changed at or after epoch
// since, and the counts of incarnations no longer live that the standby
// has not had.
func (t *Table) spread(s *slot, since uint64, alive func(uint32) bool, out []routed) []routed {
	o := s.owned()
	all := o.standbyStale
	if all || changedSince(s.ver[1], since) || changedSince(s.ver[0], since) {
		out = append(out, routed{to: o.bookOf().standby, inc: t.self, kind: KindStandby, rule: t.rule.Name,
			e: Entry{Key: s.key, Window: s.idx, Admitted: s.own[1], Prev: s.own[0]}})
	}
	for i := range o.bookOf().accts {
		a := &o.bookOf().accts[i]
		if (all || !a.spread) && !alive(a.inc) && a.adm != [2]int64{} {
			out = append(out, routed{to: o.bookOf().standby, inc: a.inc, kind: KindStandby, rule: t.rule.Name,
				e: Entry{Key: s.key, Window: s.idx, Admitted: a.adm[1], Prev: a.adm[0]}})
			a.spread = true
		}
	}
	o.standbyStale = false
	return out
}

// tellSettled sends, from the key's owner, the fleet's counts to every live
// contributor that has not heard them (an answer with Told 0, which answers
// no report), once the key has gone a whole round
// without changing: a key that keeps changing is told in the answers to its
// reports, and one that went quiet is told once, so that every node's view
// settles without a message per change to each.
func (t *Table) tellSettled(s *slot, alive func(uint32) bool, out []routed) []routed {
	b := s.o.bookOf()
	adm := b.admitted(s)
	sum := uint16(adm.Curr)
	if sum == b.roundSum && sum != b.toldSum {
		for i := range b.accts {
			a := &b.accts[i]
			// An incarnation whose counts reached this owner only through
			// another node (a handover, a standby's copy) is told too: it
			// has never reported here, and will not until its own counts
			// change, so nothing else would settle its view.
			if a.told == sum && !a.owed || !alive(a.inc) {
				continue
			}
			a.told, a.owed = sum, false
			g := b.curLine(i)
			out = append(out, routed{to: a.inc, inc: t.self, kind: KindAnswer, rule: t.rule.Name,
				e: Entry{Key: s.key, Window: s.idx, Admitted: adm.Curr - a.adm[1], Prev: adm.Prev - a.adm[0],
					Grant: g.base, Rate: g.rate, RateFrom: g.from, RateUntil: g.stop, Next: b.next(i)}})
		}
		b.toldSum = sum
	}
	b.roundSum = sum
	return out
}

// resendTo makes the next round send node id everything it is due for
// this table's keys, as after a broken connection that may have lost
// reports, answers or copies.
func (t *Table) resendTo(id uint32) {
	if t.rule.Allocation != window.Owner {
		return
	}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.slots {
			o := sh.slots[j].owned()
			if o == nil {
				continue
			}
			if o.owner == id {
				o.moved = true
				if o.bookOf() != nil {
					// Counts of others this node holds for the owner.
					o.handover = true
				}
			}
			if o.bookOf() != nil {
				if o.bookOf().standby == id {
					o.standbyStale = true
				}
				b := o.bookOf()
				for k := range b.accts {
					if b.accts[k].inc == id {
						b.accts[k].owed = true
					}
				}
				// A mark rather than a told count set to differ from the
				// book's: two resends before a round would set it back,
				// and the peer would never be told.
				b.toldSum = ^b.roundSum
			}
		}
		sh.mu.Unlock()
	}
}

// mergeForeign folds counts of incarnation inc that arrived outside a
// report (a snapshot, a peer syncing with everyone, a copy for a standby,
// or counts passed on in a report): into the key's book if this node owns
// the key or booked says to keep them here, else passed on to its owner at
// the next round.
func (t *Table) mergeForeign(inc uint32, e *Entry, now int64, booked bool) bool {
	if inc == t.self || e.Admitted < 0 || e.Admitted > maxEntry || e.Prev < 0 || e.Prev > maxEntry {
		return false
	}
	sh, s, _ := t.ownedSlot(e.Key, e.Window, now)
	if s == nil {
		return false
	}
	defer sh.mu.Unlock()
	if o := t.lease(s); o.owner != t.self && !booked {
		t.foreign(s, inc, e)
		return true
	}
	t.book(s, inc, e)
	return true
}

// foreign books counts of incarnation inc for key s, and if this node does
// not own the key passes them on to its owner at the next round; the shard
// is locked.
func (t *Table) foreign(s *slot, inc uint32, e *Entry) {
	if inc == t.self {
		return
	}
	o := t.lease(s)
	t.book(s, inc, e)
	if o.owner != t.self {
		o.handover = true
	}
}

// book folds counts of incarnation inc into the key's book; the shard is
// locked and the slot rolled to e's window or beyond.
func (t *Table) book(s *slot, inc uint32, e *Entry) {
	p := s.pos(e.Window)
	if p < 0 {
		return
	}
	b, i := s.owned().accountOf(inc)
	a := &b.accts[i]
	b.out(i)
	if a.adm[p] < e.Admitted {
		a.adm[p], a.spread = e.Admitted, false
	}
	if p == 1 && a.adm[0] < e.Prev {
		a.adm[0], a.spread = e.Prev, false
	}
	b.in(i)
}

// report folds a report entry from incarnation inc into the key's book and
// returns the owner's answer, for the window the report was made in. A node
// that does not own the key by its own view answers all the same: the
// sender sees it as owner, and the book passes to the owner at this node's
// next round. A sender whose clock is a window ahead or behind is answered
// for its window without this node's slot leaving its own.
func (t *Table) report(inc uint32, e *Entry, now int64, seq uint64) (Entry, bool) {
	if inc == t.self || !validReport(e) {
		return Entry{}, false
	}
	idx, elapsed := window.Position(now, t.rule.Window)
	if e.Window > idx+1 || e.Window < idx-1 {
		return Entry{}, false
	}
	sh, h := t.shardOf(e.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := t.slotOf(sh, e.Key, h, idx, now)
	if s == nil {
		return Entry{}, false
	}
	s.roll(idx, t.rule.Window, t.opening())
	if s.idx > idx {
		// Rolled ahead before owners kept to their own clock (a mode
		// switch): grant from no window this node has not reached.
		elapsed = 0
	}
	o := t.lease(s)
	o.ensureBook()
	if o.owner != t.self {
		o.handover = true
	}
	switch e.Window - s.idx {
	case 0:
		return t.answer(s, inc, e, seq, t.clockOf(s, elapsed))
	case 1:
		return t.answerAhead(s, inc, e, seq)
	case -1:
		return t.answerBehind(s, inc, e, seq)
	}
	return Entry{}, false
}

// answerAhead answers a report from a node whose clock has passed into the
// window after this node's: its count in this window is final, so its
// unspent grant here is free again; what it admitted in its window is held
// as its grant there; and it gets no more there until this node's clock
// gets there too.
func (t *Table) answerAhead(s *slot, inc uint32, e *Entry, seq uint64) (Entry, bool) {
	b, i := s.o.accountOf(inc)
	a := &b.accts[i]
	b.out(i)
	if a.adm[1] < e.Prev {
		a.adm[1], a.spread = e.Prev, false
	}
	next := max(b.next(i), e.Admitted)
	b.setLines(i, b.curLine(i), b.wasLine(i), next)
	if a.seq != 0 && seqBefore(seq32(seq), a.seq) {
		b.in(i)
		return Entry{}, false
	}
	a.seq, a.hasWas = seq32(seq), false
	b.setLines(i, line{base: a.adm[1]}, line{}, next)
	b.in(i)
	adm := b.admitted(s)
	return Entry{Key: s.key, Window: e.Window, Prev: adm.Curr - a.adm[1], Grant: next, Told: seq}, true
}

// answerBehind answers a report from a node whose clock is still in the
// window before this node's: it may spend there what its grant came to,
// and no more, since the rest of the fleet has left that window.
func (t *Table) answerBehind(s *slot, inc uint32, e *Entry, seq uint64) (Entry, bool) {
	b, i := s.o.accountOf(inc)
	a := &b.accts[i]
	b.out(i)
	if a.adm[0] < e.Admitted {
		a.adm[0], a.spread = e.Admitted, false
	}
	b.in(i)
	if a.seq != 0 && seqBefore(seq32(seq), a.seq) {
		return Entry{}, false
	}
	a.seq = seq32(seq)
	adm := b.admitted(s)
	return Entry{Key: s.key, Window: e.Window, Admitted: adm.Prev - a.adm[0],
		Grant: max(a.prevCap(), a.adm[0]), Next: a.cur, Told: seq}, true
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
	sh, s, _ := t.ownedSlot(e.Key, e.Window, now)
	if s == nil {
		return false
	}
	defer sh.mu.Unlock()
	t.lease(s).applyAnswer(s, e)
	return true
}

// Views returns, as a KindView delta, for every key of an owner-allocated
// rule, what this node believes the whole fleet admitted in its current and
// previous windows at moment now: its own counts and what it heard of the
// others'. Each node knows its own counts exactly but the others' only as
// its keys' owners told it, so a snapshot alone would leave a node that
// starts from it short of them: a node serves its views after its snapshot
// to a peer that pulls state, and saves them beside its counts so that,
// restarted, it does not count from only its own earlier counts while it
// has not yet found its peers.
func (r *Replica) Views(now int64) *Delta {
	r.mu.Lock()
	order := r.order
	r.mu.Unlock()
	d := &Delta{From: r.self, Full: true, Kind: KindView, Incarnations: []Incarnation{r.self}}
	for _, t := range order {
		if t.rule.Allocation != window.Owner || t.rule.IsStrict() {
			continue
		}
		var entries []Entry
		idx := window.Index(now, t.rule.Window)
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			for j := range sh.slots {
				s := &sh.slots[j]
				if s.key == "" || s.owned() == nil {
					continue
				}
				s.roll(idx, t.rule.Window, t.opening())
				if v := s.o.view(s); v != (window.Counts{}) {
					entries = append(entries, Entry{Key: s.key, Window: s.idx, Admitted: v.Curr, Prev: v.Prev})
				}
			}
			sh.mu.Unlock()
		}
		if len(entries) > 0 {
			d.Rules = append(d.Rules, RuleDelta{Rule: t.rule.Name, Entries: entries})
		}
	}
	return d
}

// receiveViews takes the views of a KindView delta (from Views, another
// node's or an earlier run's of this one) as a floor under what this node
// believes the others admitted: to this incarnation everything the fleet
// admitted then, an earlier run's counts included, was admitted by others.
// Entries for windows that have expired or for rules that are not
// owner-allocated here are dropped; entries v rejects change nothing.
func (r *Replica) receiveViews(now int64, d *Delta, v *vetting) ReceiveResult {
	var res ReceiveResult
	tables := *r.tables.Load()
	for _, rd := range d.Rules {
		t := tables[rd.Rule]
		if t == nil {
			res.UnknownRules = append(res.UnknownRules, rd.Rule)
			continue
		}
		if t.rule.Allocation != window.Owner || t.rule.IsStrict() {
			res.Dropped += len(rd.Entries)
			continue
		}
		for i := range rd.Entries {
			e := &rd.Entries[i]
			if e.Key == "" || len(e.Key) > MaxKeyLen || !validReport(e) {
				res.Dropped++
				continue
			}
			if why, bad := v.check(t, e); bad {
				res.Rejected[why]++
				continue
			}
			switch t.restoreView(e, now, v.others(t, e.Window), v.others(t, e.Window-1)) {
			case viewMerged:
				res.Merged++
			case viewOver:
				res.Rejected[OverCount]++
			default:
				res.Dropped++
			}
		}
	}
	return res
}

// What restoreView did with a view.
const (
	viewDropped = iota
	viewMerged
	// viewOver: the view says the others admitted more than they could.
	viewOver
)

// restoreView takes e as a floor under what the others admitted of its
// key, unless it says they admitted more than curMax in e's window or
// prevMax in the one before.
func (t *Table) restoreView(e *Entry, now, curMax, prevMax int64) int {
	sh, s, p := t.ownedSlot(e.Key, e.Window, now)
	if s == nil {
		return viewDropped
	}
	defer sh.mu.Unlock()
	// A view is the whole fleet's, this node's counts included as far as
	// its sender had heard them, and so at most all of them: what it says
	// the others admitted is at least the view less this node's own. At
	// start this node has counted nothing yet; a node that pulls later
	// has.
	others := e.Admitted - s.own[p]
	prev := int64(0)
	if p == 1 {
		prev = e.Prev - s.own[0]
	}
	if others > curMax || prev > prevMax {
		return viewOver
	}
	if s.o == nil {
		s.o = &owned{}
	}
	o := s.owned()
	o.others[p] = max(o.others[p], others)
	if p == 1 {
		o.others[0] = max(o.others[0], prev)
	}
	return viewMerged
}

// remark makes every key of the table report to its owner at the next
// round, as when the rule has just become owner-allocated: owners have yet
// to hear of counts made under the rule's earlier policy.
func (t *Table) remark() {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.slots {
			if o := sh.slots[j].owned(); o != nil {
				o.moved = true
			}
		}
		sh.mu.Unlock()
	}
}
