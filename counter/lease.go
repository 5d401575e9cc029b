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
	gen     uint32 // fleet generation owner was worked out in; 0: not yet
	owner   uint32 // registry id of the key's owner
	standby uint32 // registry id of the key's standby
	// grant is how far this node's own count in window idx may grow
	// without asking; next is its grant for window idx+1.
	grant line
	next  int64
	// others is what every other node admitted in the slot's windows, as
	// the owner last said.
	others [2]int64
	// heardAt is this node's own count in window idx when it last heard
	// what the others admitted: what it admits beyond that, the owner has
	// not counted unless it granted it.
	heardAt int64
	// told is the report whose answer was applied last.
	told uint64
	// demand is the hits asked for since the last round, and last and
	// before those of the two intervals before it (saturating counts).
	demand, last, before int32
	// moved says the owner changed since the last report: the next one
	// carries everything. unacked says an answer was applied since the
	// last report: the owner counts this node as able to spend its old
	// grant too until a report says the answer was applied. handover says
	// this node owned the key and has yet to pass its book to the new
	// owner; standbyStale, on the owner, that the standby changed and is
	// to be sent everything.
	// stranded says this node held a grant it had not spent when the
	// window closed: the next round tells the owner what was spent.
	moved, unacked, handover, standbyStale, stranded bool
	// book holds, on the key's owner, one account per other node that
	// touched the key; on its standby, the counts the owner sent it.
	book *book
}

// othersAdmitted is what every other node admitted in the slot's windows,
// as this node knows it: on the owner its book, on others what the owner
// last said, and never less than a standby's copy of the owner's counts.
func (o *owned) othersAdmitted() [2]int64 {
	c := o.others
	if o.book != nil {
		var sum [2]int64
		for i := range o.book.accts {
			sum[0] += o.book.accts[i].adm[0]
			sum[1] += o.book.accts[i].adm[1]
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

func (o *owned) roll(shift, oldEnd int64, w time.Duration) {
	if shift == 1 {
		o.others = [2]int64{o.others[1], 0}
	} else {
		o.others = [2]int64{}
	}
	o.heardAt = 0
	o.grant, o.next = line{base: o.next}, 0
	if shift > 1 {
		o.grant = line{}
	}
	if o.book != nil {
		o.book.roll(shift, oldEnd, w)
	}
}

// idle reports whether o holds nothing a later decision or peer needs.
func (o *owned) idle() bool {
	return o.grant == line{} && o.next == 0 && o.others == [2]int64{} &&
		o.demand == 0 && o.last == 0 && o.before == 0 && (o.book == nil || len(o.book.accts) == 0)
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
	o := s.o
	view := o.view(s)
	if hits > 0 && s.own[1]+hits <= o.grant.at(c.now, c.end, t.rule.Window) {
		view.Curr += hits
		d = t.rule.DecideAt(view, c.elapsed, 0)
		d.Allowed, d.RetryAfter = true, 0
		return d, false
	}
	d = t.rule.DecideAt(view, c.elapsed, hits)
	if hits == 0 || !d.Allowed {
		return d, false
	}
	if s.own[1]+hits <= t.opening() {
		// The key's first hits here in the window: the owner holds an
		// opening back for every node, so they need no question.
		return d, false
	}
	if o.grant.rate > 0 {
		// The key is saturated and the owner shares what the previous
		// window's decay releases as it is released: asking would find
		// no more.
		if wait, ok := o.grant.until(s.own[1]+hits, c.now, c.end, t.rule.Window); ok {
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
	d := t.rule.DecideAt(s.o.view(s), c.elapsed, hits)
	if d.Allowed {
		d.Allowed, d.Remaining, d.RetryAfter = false, 0, t.rule.SyncInterval
	}
	return d
}

// refuseLate is the refusal of hits the owner was asked for and did not
// answer in time: the room this node's view shows may be the owner's to
// give to others meanwhile. It is worth asking again after a sync interval.
func (t *Table) refuseLate(s *slot, c clock, hits int64) window.Decision {
	d := t.rule.DecideAt(s.o.view(s), c.elapsed, hits)
	if d.Allowed {
		d.Allowed, d.RetryAfter = false, t.rule.SyncInterval
	}
	return d
}

// admitAsked decides hits on a node whose question to the owner went
// unanswered (the owner is unreachable): from its view alone, and within its
// share of what the fleet had left when it last heard from the owner, on top
// of its grant, so that however many nodes lose the owner at once, together
// they admit at most what the fleet had left as they last heard.
func (t *Table) admitAsked(s *slot, c clock, hits int64) window.Decision {
	o := s.o
	view := o.view(s)
	d := t.rule.DecideAt(view, c.elapsed, hits)
	live := int64(max(t.live.Load(), 1))
	if !d.Allowed || hits == 0 || live == 1 {
		return d
	}
	heard := view
	heard.Curr -= s.own[1] - o.heardAt
	past := max(o.heardAt, o.grant.at(c.now, c.end, t.rule.Window))
	if room := t.rule.RemainingAt(heard, c.elapsed); s.own[1]+hits-past > room/live {
		d.Allowed, d.RetryAfter = false, t.rule.SyncInterval
	}
	return d
}

// applyAnswer folds an owner's answer for window w into the key's lease; the
// slot is rolled to w or beyond.
func (o *owned) applyAnswer(s *slot, e *Entry) {
	if e.Told == o.told && o.told != 0 {
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
		o.heardAt = s.own[1]
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
		o.heardAt = s.own[1]
		if g := (line{base: e.Grant, rate: e.Rate, from: e.RateFrom}); g != o.grant {
			o.grant, o.unacked = g, true
		}
		o.next = max(o.next, e.Next)
	case 0:
		// Answered in the window before this node's: only the grant for
		// the next window (this one) and the old counts still matter.
		o.others[0] = max(o.others[0], e.Admitted)
		o.grant.base = max(o.grant.base, e.Next)
	}
}

// need is this node's demand per sync interval for the key, as far as it
// is steady: the lesser of its last two whole intervals', for a burst that
// fits in less than two says nothing of the rate to come, and a grant sized
// by it would sit unspent while other nodes go without.
func (o *owned) need() int64 { return int64(min(o.last, o.before)) }

// addDemand counts hits asked for, saturating.
func (o *owned) addDemand(hits int64) {
	o.demand = int32(min(int64(o.demand)+hits, math.MaxInt32))
}

// rotate starts a sync interval's demand count.
func (o *owned) rotate() {
	o.before, o.last, o.demand = o.last, o.demand, 0
}

// reportEntry is this node's report of the key to its owner. The need it
// reports covers a sync interval and the round trip to the owner: what it
// spends before the grant it asks for can land.
func (t *Table) reportEntry(s *slot, ask int64) Entry {
	o := s.o
	need := o.need()
	if rtt, every := t.rtt.of(o.owner), int64(t.rule.SyncInterval); rtt > 0 && need > 0 {
		need = mulDivUp(need, every+min(rtt, 8*every), every)
	}
	return Entry{Key: s.key, Window: s.idx, Admitted: s.own[1], Prev: s.own[0],
		Grant: o.grant.base, Rate: o.grant.rate, RateFrom: o.grant.from,
		Need: need, Ask: ask, Told: o.told}
}
