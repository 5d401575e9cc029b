package counter

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/window"
)

// owned is what owner allocation keeps for a key on one node: the grant it
// admits from and the fleet's counts as the key's owner last told it, and,
// on the owner, the key's book.
type owned struct {
	gen   uint32 // fleet generation owner was worked out in; 0: not yet
	owner uint32 // registry id of the key's owner
	// demand is the hits asked for since the last round, and last and
	// before those of the two intervals before it (saturating counts: they
	// weigh shares, and a key asked for 65,535 times an interval on one
	// node is as busy as it needs to be to get its share).
	demand, last, before uint16
	// moved says the owner changed since the last report: the next one
	// carries everything. unacked says an answer was applied since the
	// last report: the owner counts this node as able to spend its old
	// grant too until a report says the answer was applied. handover says
	// this node owned the key (or stood by for it) and has yet to pass its
	// book to the new owner; standbyStale, on the owner, that the standby
	// changed and is to be sent everything. stranded says this node held
	// a grant it had not spent when the window closed: the next round
	// tells the owner what was spent.
	moved, unacked, handover, standbyStale, stranded bool
	// grant is how far this node's own count in window idx may grow
	// without asking, as of when it was granted.
	grant int64
	// others is what every other node admitted in the slot's windows, as
	// the owner last said.
	others [2]int64
	// told is the report whose answer was applied last.
	told uint64
	// ext holds what few keys need (nil for the rest).
	ext *ownedExt
}

// ownedExt is what few keys need of owner allocation: a grant that grows
// with time (a saturated sliding window) or reaches into the next window
// (the end of a busy fixed one); on the key's standby, the owner's own
// counts; and on the owner, or a standby that holds counts of incarnations
// no longer live, the key's book.
type ownedExt struct {
	rate, from, until, next int64
	held                    [2]int64
	heldFrom                uint32 // registry id of the owner held is of
	book                    *book
}

// bookOf returns the key's book here, or nil.
func (o *owned) bookOf() *book {
	if o.ext == nil {
		return nil
	}
	return o.ext.book
}

// ensureBook returns the key's book here, starting one if there is none.
func (o *owned) ensureBook() *book {
	x := o.extend()
	if x.book == nil {
		x.book = &book{}
	}
	return x.book
}

// accountOf returns the key's book and the index of inc's account in it,
// adding both if absent. An incarnation is counted once: if the standby
// copy this node holds is of inc, the copy passes into the account.
func (o *owned) accountOf(inc uint32) (*book, int) {
	b := o.ensureBook()
	i := b.find(inc)
	if x := o.ext; x.heldFrom != 0 && x.heldFrom == inc {
		// heldFrom 0 is this node's own id, which holds no copy.
		o.foldHeld(b, i)
	}
	return b, i
}

// foldHeld passes the standby copy this node holds into account i, of the
// incarnation the copy is of.
func (o *owned) foldHeld(b *book, i int) {
	x := o.ext
	a := &b.accts[i]
	b.out(i)
	a.adm = [2]int64{max(a.adm[0], x.held[0]), max(a.adm[1], x.held[1])}
	b.in(i)
	x.held, x.heldFrom = [2]int64{}, 0
}

// extend returns o.ext, allocating it if need be.
func (o *owned) extend() *ownedExt {
	if o.ext == nil {
		o.ext = &ownedExt{}
	}
	return o.ext
}

// trim drops o.ext once it holds nothing.
func (o *owned) trim() {
	if x := o.ext; x != nil && *x == (ownedExt{}) {
		o.ext = nil
	}
}

// dropBook forgets the key's book here.
func (o *owned) dropBook() {
	if o.ext != nil {
		o.ext.book = nil
		o.trim()
	}
}

// grantLine is the node's grant as a line.
func (o *owned) grantLine() line {
	if o.ext == nil {
		return line{base: o.grant}
	}
	return line{base: o.grant, rate: o.ext.rate, from: o.ext.from, stop: o.ext.until}
}

// nextGrant is the node's grant for the window after the slot's.
func (o *owned) nextGrant() int64 {
	if o.ext == nil {
		return 0
	}
	return o.ext.next
}

// setGrant sets the node's grant and its grant for the next window.
func (o *owned) setGrant(g line, next int64) {
	o.grant = g.base
	if g.rate == 0 && next == 0 && o.ext == nil {
		return
	}
	if g.rate == 0 {
		g.from, g.stop = 0, 0
	}
	x := o.extend()
	x.rate, x.from, x.until, x.next = g.rate, g.from, g.stop, next
	o.trim()
}

// grantAt is the node's grant at moment t of a window of length w ending at
// end.
func (o *owned) grantAt(t, end int64, w time.Duration) int64 {
	if o.ext == nil || o.ext.rate == 0 {
		return o.grant
	}
	return o.grantLine().at(t, end, w)
}

// owned returns the slot's owner-allocation state, or nil.
func (s *slot) owned() *owned { return s.o }

// othersAdmitted is what every other node admitted in the slot's windows,
// as this node knows it: on the owner its book, on others what the owner
// last said, and never less than a standby's copy of the owner's counts.
func (o *owned) othersAdmitted() [2]int64 {
	c := o.others
	if x := o.ext; x != nil {
		sum := x.held
		if b := x.book; b != nil && b.agg != nil && b.agg.valid {
			sum[0] += b.agg.adm[0]
			sum[1] += b.agg.adm[1]
		} else if b != nil {
			for i := range b.accts {
				sum[0] += b.accts[i].adm[0]
				sum[1] += b.accts[i].adm[1]
			}
		}
		c = [2]int64{max(c[0], sum[0]), max(c[1], sum[1])}
	}
	return c
}

// floor raises a view of the slot's windows, its own counts and its peers'
// as full-mesh sync brought them, to what owner allocation learnt of the
// others: both are lower bounds of what the others admitted.
func (o *owned) floor(s *slot, view window.Counts) window.Counts {
	c := o.othersAdmitted()
	view.Prev = max(view.Prev, s.own[0]+c[0])
	view.Curr = max(view.Curr, s.own[1]+c[1])
	return view
}

// view is what the fleet admitted in the slot's windows as this node
// knows it.
func (o *owned) view(s *slot) window.Counts {
	c := o.othersAdmitted()
	return window.Counts{Prev: s.own[0] + c[0], Curr: s.own[1] + c[1]}
}

func (o *owned) roll(shift, oldEnd int64, w time.Duration, open int64) {
	if shift == 1 {
		o.others = [2]int64{o.others[1], 0}
	} else {
		o.others = [2]int64{}
	}
	next := o.nextGrant()
	if shift > 1 {
		next = 0
	}
	o.setGrant(line{base: next}, 0)
	if x := o.ext; x != nil {
		if shift == 1 {
			x.held = [2]int64{x.held[1], 0}
		} else {
			x.held = [2]int64{}
		}
		if x.book != nil {
			x.book.roll(shift, oldEnd, w, open)
		}
		o.trim()
	}
}

// lapse voids the grants this node holds, and on the owner those it made,
// down to what was admitted: what they left unspent may since have been
// spent elsewhere.
func (o *owned) lapse(s *slot) {
	o.setGrant(line{base: s.own[1]}, 0)
	o.moved = true
	if b := o.bookOf(); b != nil {
		for i := range b.accts {
			a := &b.accts[i]
			a.cur, a.hasWas = a.adm[1], false
		}
		b.lines = nil
		b.stale()
	}
}

// idle reports whether o holds nothing a later decision or peer needs.
func (o *owned) idle() bool {
	b := o.bookOf()
	return o.grant == 0 && o.others == [2]int64{} && o.demand == 0 && o.last == 0 && o.before == 0 &&
		(o.ext == nil || o.ext.next == 0 && o.ext.held == [2]int64{} && (b == nil || len(b.accts) == 0))
}

// clock is a moment worked out once per decision: the time, the end of the
// slot's current window, and how far into it the moment is.
type clock struct {
	now, end int64
	elapsed  time.Duration
}

func (t *Table) clockOf(s *slot, elapsed time.Duration) clock {
	w := int64(t.rule.Window)
	return clock{now: s.idx*w + int64(elapsed), end: (s.idx + 1) * w, elapsed: elapsed}
}

// decideOwned decides on a node that is not the key's owner: within its
// grant at once, a refusal at once when its view of the fleet is full or
// its grant grows with time, and otherwise ask reports that the owner must
// be asked.
func (t *Table) decideOwned(s *slot, c clock, hits int64) (d window.Decision, ask bool) {
	o := s.owned()
	view := o.view(s)
	if hits > 0 && s.own[1]+hits <= o.grantAt(c.now, c.end, t.rule.Window) {
		view.Curr += hits
		d = t.rule.DecideAt(view, c.elapsed, 0)
		d.Allowed, d.RetryAfter = true, 0
		return d, false
	}
	d = t.rule.DecideAt(view, c.elapsed, hits)
	if hits == 0 {
		return d, false
	}
	if !d.Allowed {
		if g := o.grantLine(); g.rate > 0 {
			// Once the fleet has room, this node admits what its grant
			// has grown to, which may lag the view's room (the owner
			// rounds the decay it shares, and shares it among those who
			// ask): a retry before both would be refused again.
			if wait, ok := g.until(s.own[1]+hits, c.now, c.end, t.rule.Window); ok {
				d.RetryAfter = max(d.RetryAfter, wait)
			}
		}
		return d, false
	}
	if s.own[1]+hits <= t.opening() {
		// The key's first hits here in the window: the owner holds an
		// opening back for every node, so they need no question.
		return d, false
	}
	if g := o.grantLine(); g.rate > 0 {
		// The key is saturated and the owner shares what the previous
		// window's decay releases as it is released: asking would find
		// no more.
		if wait, ok := g.until(s.own[1]+hits, c.now, c.end, t.rule.Window); ok {
			d.Allowed, d.RetryAfter = false, wait
			return d, false
		}
	}
	return d, true
}

// refuseAnswered is the refusal of hits the owner was asked for and did not
// grant. The answer brought the fleet's counts, so where they show the
// window full the wait is exact; where they show room, that room is held as
// other nodes' grants, which they give back at their next round.
func (t *Table) refuseAnswered(s *slot, c clock, hits int64) window.Decision {
	d := t.rule.DecideAt(s.owned().view(s), c.elapsed, hits)
	if d.Allowed {
		d.Allowed, d.Remaining, d.RetryAfter = false, 0, t.rule.SyncInterval
	}
	return d
}

// refuseLate is the refusal of hits the owner was asked for and did not
// answer in time: the room this node's view shows may be the owner's to
// give to others meanwhile. It is worth asking again after a sync interval.
func (t *Table) refuseLate(s *slot, c clock, hits int64) window.Decision {
	o := s.owned()
	view := o.view(s)
	d := t.rule.DecideAt(view, c.elapsed, hits)
	if d.Allowed {
		d = t.refuseUnheard(d, view, c, o.grantAt(c.now, c.end, t.rule.Window)-s.own[1])
	}
	return d
}

// admitAsked decides hits on a node whose question to the owner went
// unanswered (the owner is unreachable): from its view alone, and within its
// share of what the fleet had left when it last heard from the owner, on top
// of its grant, so that however many nodes lose the owner at once, together
// they admit at most what the fleet had left as they last heard. Remaining
// is what is left of that share: the node cannot vouch for more.
func (t *Table) admitAsked(s *slot, c clock, hits int64) window.Decision {
	o := s.owned()
	view := o.view(s)
	d := t.rule.DecideAt(view, c.elapsed, hits)
	live := int64(max(t.live.Load(), 1))
	if live == 1 {
		return d
	}
	// What the owner counts this node for: its grant, all spent.
	past := o.grantAt(c.now, c.end, t.rule.Window)
	heard := view
	heard.Curr += past - s.own[1]
	alone := past - s.own[1] + t.rule.RemainingAt(heard, c.elapsed)/live
	switch {
	case d.Allowed && max(hits, 1) > alone:
		return t.refuseUnheard(d, view, c, alone)
	case d.Allowed:
		d.Remaining = min(d.Remaining, alone-hits)
	default:
		d.Remaining = min(d.Remaining, max(alone, 0))
	}
	return d
}

// refuseUnheard turns d, which admits hits by this node's view, into the
// refusal of a node that cannot vouch for that room without the key's
// owner: Remaining is what it may still admit on its own, alone, which is
// fewer than hits, not the view's room, which the owner may have granted
// to others.
func (t *Table) refuseUnheard(d window.Decision, view window.Counts, c clock, alone int64) window.Decision {
	d.Allowed, d.RetryAfter = false, t.rule.SyncInterval
	d.Remaining = min(t.rule.RemainingAt(view, c.elapsed), max(alone, 0))
	return d
}

// applyAnswer folds an owner's answer for window w into the key's lease; the
// slot is rolled to w or beyond.
func (o *owned) applyAnswer(s *slot, e *Entry) {
	if e.Told == 0 {
		// Told 0 answers no report: the fleet's counts of a key that has
		// gone quiet, sent unasked.
		o.applySettled(s, e)
		return
	}
	if e.Told <= o.told {
		return
	}
	o.told = e.Told
	o.fold(s, e)
}

// applySettled folds the fleet's counts an owner sent unasked, with the
// grant this node already holds: counts only grow within a window.
func (o *owned) applySettled(s *slot, e *Entry) {
	switch s.pos(e.Window) {
	case 1:
		o.others = [2]int64{max(o.others[0], e.Prev), max(o.others[1], e.Admitted)}
	case 0:
		o.others[0] = max(o.others[0], e.Admitted)
	}
}

// fold applies an answer's counts and grant. Counts only grow within a
// window, and what an owner knows is a lower bound of them, as is what this
// node knew before: the larger is kept.
func (o *owned) fold(s *slot, e *Entry) {
	switch s.pos(e.Window) {
	case 1:
		o.others = [2]int64{max(o.others[0], e.Prev), max(o.others[1], e.Admitted)}
		g, next := line{base: e.Grant, rate: e.Rate, from: e.RateFrom, stop: e.RateUntil}, max(o.nextGrant(), e.Next)
		if g != o.grantLine() {
			o.unacked = true
		}
		o.setGrant(g, next)
	case 0:
		// Answered in the window before this node's: only the grant for
		// the next window (this one) and the old counts still matter.
		o.others[0] = max(o.others[0], e.Admitted)
		g := o.grantLine()
		g.base = max(g.base, e.Next)
		o.setGrant(g, o.nextGrant())
	}
}

// need is this node's demand per sync interval for the key, as far as it
// is steady: the lesser of its last two whole intervals', for a burst that
// fits in less than two says nothing of the rate to come, and a grant sized
// by it would sit unspent while other nodes go without.
func (o *owned) need() int64 { return int64(min(o.last, o.before)) }

// addDemand counts hits asked for, saturating.
func (o *owned) addDemand(hits int64) {
	o.demand = uint16(min(int64(o.demand)+hits, math.MaxUint16))
}

// rotate starts a sync interval's demand count.
func (o *owned) rotate() {
	o.before, o.last, o.demand = o.last, o.demand, 0
}

// reportEntry is this node's report of the key to its owner. The need it
// reports is what it will spend before it could ask for more: where it can
// ask the owner in time and the count is small, only what it is asked for
// during a round trip, for every hit granted beyond that is held away from
// the rest of the fleet while an exact limiter would hand it to whoever
// asks first; otherwise a sync interval of demand and the round trip, for
// a node that cannot ask in time spends its grant until the next one lands.
func (t *Table) reportEntry(s *slot, ask int64) Entry {
	o := s.owned()
	rtt := t.rtt.of(o.owner)
	g := o.grantLine()
	return Entry{Key: s.key, Window: s.idx, Admitted: s.own[1], Prev: s.own[0],
		Grant: o.grant, Rate: g.rate, RateFrom: g.from, RateUntil: g.stop,
		Need: t.reportNeed(o.need(), rtt), Ask: ask, Told: o.told, Pooled: t.asksFaster(o.need(), rtt)}
}

// asksFaster reports whether a node with demand per sync interval, rtt
// from the key's owner, asks the owner and hears back in less time than
// its own checks take to arrive one after another: the demand of one round
// trip rounds down to 0. Such a node loses less by asking for the last
// hits of a window than by holding a grant that grows to the window's end,
// whose last hits its next check may come too late to spend.
func (t *Table) asksFaster(demand, rtt int64) bool {
	every := int64(t.rule.SyncInterval)
	return t.rule.Type == window.Sliding && demand > 0 && t.rtt.inTime(rtt) && mulDiv(demand, min(rtt, 8*every), every) == 0
}

// reportNeed is the need reported for demand hits per sync interval to an
// owner rtt away (0: not known yet).
func (t *Table) reportNeed(demand, rtt int64) int64 {
	if demand <= 0 {
		return 0
	}
	every := int64(t.rule.SyncInterval)
	trip := min(rtt, 8*every)
	if t.rtt.inTime(rtt) && t.rule.Count < spareFloor*int64(t.live.Load()) {
		return mulDiv(demand, trip, every)
	}
	return mulDivUp(demand, every+trip, every)
}
