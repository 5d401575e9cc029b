package counter

import (
	"time"

	"github.com/sluicehq/sluice/window"
)

// owned is what owner allocation keeps for a key on one node: the grant it
// admits from and the fleet's counts as the key's owner last told it, and,
// on the owner, the key's book.
type owned struct {
	gen   uint32 // fleet generation owner was worked out in; 0: not yet
	owner uint32 // registry id of the key's owner
	// grant is how far this node's own count in window idx may grow
	// without asking; next is its grant for window idx+1.
	grant line
	next  int64
	// others is what every other node admitted in the slot's windows, as
	// the owner last said.
	others [2]int64
	// told is the report whose answer was applied last.
	told uint64
	// demand is the hits asked for since the last round, need those of the
	// interval before it.
	demand, need int64
	// moved says the owner changed since the last report: the next one
	// carries everything. unacked says an answer was applied since the
	// last report: the owner counts this node as able to spend its old
	// grant too until a report says the answer was applied.
	moved, unacked bool
	book           *book
}

func (o *owned) roll(shift, oldEnd int64, w time.Duration) {
	if shift == 1 {
		o.others = [2]int64{o.others[1], 0}
	} else {
		o.others = [2]int64{}
	}
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
		o.demand == 0 && o.need == 0 && (o.book == nil || len(o.book.accts) == 0)
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
	view := window.Counts{Prev: o.others[0] + s.own[0], Curr: o.others[1] + s.own[1]}
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
	o := s.o
	view := window.Counts{Prev: o.others[0] + s.own[0], Curr: o.others[1] + s.own[1]}
	d := t.rule.DecideAt(view, c.elapsed, hits)
	if d.Allowed {
		d.Allowed, d.Remaining, d.RetryAfter = false, 0, t.rule.SyncInterval
	}
	return d
}

// admitAsked decides hits on a node whose question to the owner went
// unanswered (the owner is unreachable): from its view alone, as one exact
// limiter would, so that each node admits at most what it believes the
// fleet has left.
func (t *Table) admitAsked(s *slot, elapsed time.Duration, hits int64) window.Decision {
	o := s.o
	view := window.Counts{Prev: o.others[0] + s.own[0], Curr: o.others[1] + s.own[1]}
	return t.rule.DecideAt(view, elapsed, hits)
}

// applyAnswer folds an owner's answer for window w into the key's lease; the
// slot is rolled to w or beyond.
func (o *owned) applyAnswer(s *slot, e *Entry) {
	if e.Told <= o.told {
		return
	}
	o.told = e.Told
	switch s.pos(e.Window) {
	case 1:
		o.others = [2]int64{e.Prev, e.Admitted}
		if g := (line{base: e.Grant, rate: e.Rate, from: e.RateFrom}); g != o.grant {
			o.grant, o.unacked = g, true
		}
		o.next = max(o.next, e.Next)
	case 0:
		// Answered in the window before this node's: only the grant for
		// the next window (this one) and the old counts still matter.
		o.others[0] = e.Admitted
		o.grant.base = max(o.grant.base, e.Next)
	}
}

// reportEntry is this node's report of the key to its owner.
func (o *owned) reportEntry(s *slot, ask int64) Entry {
	return Entry{Key: s.key, Window: s.idx, Admitted: s.own[1], Prev: s.own[0],
		Grant: o.grant.base, Rate: o.grant.rate, RateFrom: o.grant.from,
		Need: max(o.need, o.demand), Ask: ask, Told: o.told}
}
