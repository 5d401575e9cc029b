package counter

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/window"
)

// adaptive shares a rule's budget between nodes by demand and keeps the
// fleet within the limit between syncs.
//
// At each sync a node works out the unclaimed budget: the headroom of its
// view, less what every live peer may still spend before its own next sync
// (the claim it announced, plus its share of what a sliding window has
// released since; or, for a peer not heard from in this window, what it may
// spend before its first sync: the opening it announced for a fresh fixed
// window, or else its equal share of the limit or twice its last known need
// per interval, whichever is smaller). The node claims a part
// of that: an ample interval of its own need (twice the need, with room for
// the ups and downs of arrivals), or, when more is unclaimed, a share of it
// that blends its share of demand with an equal share, so that a node in a
// lull is not starved by a busy one. When the stock cannot hold every node's
// ample need, the margins above need shrink in proportion (and, when even
// the needs do not fit, the needs), so that budget does not sit in the
// claims of quiet nodes while busy ones refuse. The node announces the
// claim, and until its next sync admits what the claim and its share of the
// budget released meanwhile allow. Claims are subtracted by everyone else,
// so nodes that sync in turn never hand the same budget out twice.
type adaptive struct{}

// presumed is what a node may spend in a window before its first sync there:
// its equal share of the limit, or, when its need is known, its need with
// room to spare if that is smaller. Every node computes the same figure for
// every other.
func presumed(count int64, live int32, need int64, known bool) int64 {
	eq := max(count/int64(live), 1)
	if known {
		return min(eq, ample(need))
	}
	return eq
}

// ample is a need per interval with room for the ups and downs of arrivals:
// twice the need, plus three standard deviations of a Poisson count with
// that mean, plus one so that a quiet key can still admit a request.
func ample(need int64) int64 {
	return 2*need + int64(math.Ceil(3*math.Sqrt(float64(need)))) + 1
}

func (adaptive) decide(t *Table, s *slot, own, view window.Counts, at moment, hits int64) window.Decision {
	a := &s.x.alloc
	need := max(hits, 1)
	now := at.now
	d := t.rule.DecideAt(view, at.elapsed, hits)
	if hits > 0 {
		if a.demand == 0 && !a.synced {
			a.demandAt = now
		}
		a.demand += hits
	}
	if !d.Allowed {
		return d
	}
	spent, allowance := a.allowance(t, own, at)
	if spent+need > allowance {
		d.Allowed = false
		d.RetryAfter = untilSync(t, now)
		d.Remaining = max(allowance-spent, 0)
		return d
	}
	if hits > 0 {
		a.spent += hits
	}
	d.Remaining = min(d.Remaining, max(allowance-spent-hits, 0))
	return d
}

// allowance returns what this node has spent against its current allowance
// and the allowance itself.
func (a *allocState) allowance(t *Table, own window.Counts, at moment) (spent, allowance int64) {
	live := t.live.Load()
	switch {
	case !a.synced:
		// A key this node has not synced yet: its presumed share.
		return a.spent, presumed(t.rule.Count, live, a.need, false)
	case t.rule.Type == window.Fixed && at.idx != a.syncWin:
		// A fixed window starts afresh; until this node's first sync in it,
		// the opening it announced (the smaller of its last two, as a peer
		// may not have the latest yet), or its presumed share.
		if a.opens {
			return own.Curr, min(a.opening, a.openingBefore)
		}
		return own.Curr, presumed(t.rule.Count, live, a.need, true)
	case t.rule.Type == window.Sliding && at.idx == a.syncWin:
		// Within the window of the last sync the previous window's count
		// decays linearly: no division needed.
		rel := a.releaseRate * float64(at.now-a.syncAt)
		return a.spent, a.budget + int64(math.Floor(rel))
	case t.rule.Type == window.Sliding:
		rel := a.share * float64(max(headroomAt(&t.rule, a.frozen, a.syncWin, at)-a.left, 0))
		// What this node admitted in the sync's window after the sync
		// decays too. Peers counted it as spent from this node's claim
		// without seeing it, so its release is this node's alone.
		if at.idx == a.syncWin+1 {
			rel += float64(max(own.Prev-a.ownAtSync, 0)) * float64(at.elapsed) / float64(t.rule.Window)
		}
		return a.spent, a.budget + int64(math.Floor(rel))
	}
	return a.spent, a.budget
}

// headroomAt is the headroom that counts c, held in window cWin, leave at
// moment at if nothing more is admitted: it grows as the sliding window's
// decay releases budget.
func headroomAt(r *window.Rule, c window.Counts, cWin int64, at moment) int64 {
	switch at.idx - cWin {
	case 0:
		return r.RemainingAt(c, at.elapsed)
	case 1:
		return r.RemainingAt(window.Counts{Prev: c.Curr}, at.elapsed)
	}
	return r.Count
}

func (adaptive) sync(t *Table, s *slot, now, idx int64, epoch uint64) {
	x := s.x
	a := &x.alloc
	live := t.live.Load()
	alive := t.alive()
	count := t.rule.Count
	fixed := t.rule.Type == window.Fixed
	oldClaim, oldNeed, oldWin := a.budget, a.announcedNeed, a.syncWin
	a.need = perInterval(a.demand, time.Duration(now-a.demandAt), t.rule.SyncInterval)
	a.demand, a.demandAt = 0, now

	ownNow, view := s.counts(idx)
	headroom := t.rule.Remaining(view, now)

	// The need peers will hold for this node after this sync: a new one
	// only when it moved by more than an eighth.
	said := a.announcedNeed
	if moved(oldNeed, a.need) {
		said = a.need
	}
	// Release shares follow need, as announced, so that every node works
	// out the same shares and they add up to one; with no need anywhere
	// they are equal.
	shares := sharesOf(x, alive, said, live)
	outstanding := peersOutstanding(t, x, alive, shares, now, idx, view)
	unclaimed := headroom - outstanding
	// Claim at least an ample interval of own need, and when the stock is
	// plentiful a share of it that blends this node's share of demand with
	// an equal share, so that a node in a lull is not starved by a busy one.
	weight := (shares.of(said) + 1/float64(live)) / 2
	sc := scarcity(x, alive, a.need, live, count, headroom)
	claim := min(unclaimed, max(sc.margin(a.need), int64(float64(max(unclaimed, 0))*weight)))

	a.budget, a.spent = max(claim, 0), 0
	a.syncs++
	a.synced, a.syncAt, a.syncWin, a.frozen, a.left = true, now, idx, view, headroom
	a.ownAtSync = ownNow.Curr
	a.share = shares.of(said)
	a.releaseRate = a.share * float64(view.Prev) / float64(t.rule.Window)
	// Announce a new claim or opening, a need that moved by more than an
	// eighth (tick jitter moves it by one every round), and at least once a
	// window, so that peers can tell a quiet node that still holds the key
	// from one that forgot it.
	opening := a.opening
	if fixed {
		opening = openingFor(x, alive, a.need, live, count)
	}
	if a.budget != oldClaim || idx != oldWin || said != oldNeed || opening != a.opening {
		s.ver[1] = stampOf(epoch)
		a.announcedNeed = said
		if fixed {
			a.openingBefore, a.opening = a.opening, opening
			if !a.opens {
				a.openingBefore, a.opens = opening, true
			}
		}
	}
}

// moved reports whether need differs from the announced one by more than an
// eighth (or by any amount from or to zero).
func moved(announced, need int64) bool {
	if announced == 0 || need == 0 {
		return announced != need
	}
	d := need - announced
	return d > announced/8 || -d > announced/8
}

// perInterval scales demand seen over elapsed to one sync interval. A first
// interval that started late (a key's first request just before a sync)
// counts as at least a quarter interval, so one request is not mistaken for
// a flood.
func perInterval(demand int64, elapsed, interval time.Duration) int64 {
	if demand == 0 {
		return 0
	}
	elapsed = max(elapsed, interval/4)
	return int64(math.Ceil(float64(demand) * float64(interval) / float64(elapsed)))
}

func (adaptive) published(s *slot) [2]int64 { return s.own }

func (adaptive) unpublished(*slot) int64 { return 0 }

func (adaptive) announce(s *slot) news {
	a := &s.x.alloc
	return news{claim: a.budget, need: a.announcedNeed, opening: a.opening, opens: a.opens}
}

// scarce says how much of the nodes' ample needs a stock can hold.
type scarce struct {
	frac  float64 // of each margin above need that fits; 1 when plentiful
	ratio float64 // of each need that fits; below 1 only when even the needs do not
}

// scarcity weighs the stock against the ample needs of every live node.
// Margins above need only strand budget in the claims of nodes that do not
// use it when the stock is short, so there they shrink in proportion until
// the needs fit, and then the needs do.
func scarcity(x *shared, alive func(uint32) bool, own int64, live int32, count, stock int64) scarce {
	eq := max(count/int64(live), 1)
	needs, amples, counted := own, ample(own), int32(1)
	for i := range x.peers {
		p := &x.peers[i]
		if !alive(p.inc) {
			continue
		}
		counted++
		if p.heard {
			needs, amples = needs+p.need, amples+ample(p.need)
		} else {
			needs, amples = needs+eq, amples+eq
		}
	}
	// Live peers that have never spoken of the key hold their equal share.
	rest := int64(max(live-counted, 0)) * eq
	needs, amples = needs+rest, amples+rest
	switch {
	case amples <= stock:
		return scarce{frac: 1, ratio: 1}
	case needs <= stock:
		return scarce{frac: float64(stock-needs) / float64(amples-needs), ratio: 1}
	}
	return scarce{ratio: float64(max(stock, 0)) / float64(needs)}
}

// margin is need with the part of its margin that fits; at least one, so
// that a quiet key can still admit a request.
func (s scarce) margin(need int64) int64 {
	if s.ratio < 1 {
		return max(int64(math.Ceil(s.ratio*float64(need))), 1)
	}
	return max(need+int64(math.Ceil(s.frac*float64(ample(need)-need))), 1)
}

// openingFor is what a node with need may spend in a fresh fixed window
// before its first sync there: its ample need, or as much of it as fits
// the whole count beside every live node's, and no more than its peers
// have left of the count by what they said they would take.
func openingFor(x *shared, alive func(uint32) bool, need int64, live int32, count int64) int64 {
	eq := max(count/int64(live), 1)
	held, counted := int64(0), int32(1)
	for i := range x.peers {
		p := &x.peers[i]
		if !alive(p.inc) {
			continue
		}
		counted++
		switch {
		case p.opens:
			held += p.opening
		default:
			held += presumed(count, live, p.need, p.heard)
		}
	}
	held += int64(max(live-counted, 0)) * eq
	return min(scarcity(x, alive, need, live, count, count).margin(need), max(count-held, 0))
}

// shares divides released budget between live nodes by announced need.
type shares struct {
	total int64 // the live nodes' needs, this node's included
	live  int32
}

// sharesOf weighs own, this node's announced need, beside its live peers'.
func sharesOf(x *shared, alive func(uint32) bool, own int64, live int32) shares {
	sh := shares{total: own, live: live}
	for i := range x.peers {
		if p := &x.peers[i]; p.heard && alive(p.inc) {
			sh.total += p.need
		}
	}
	return sh
}

// of is the share of a node with need; with no need anywhere shares are
// equal.
func (sh shares) of(need int64) float64 {
	if sh.total == 0 {
		return 1 / float64(sh.live)
	}
	return float64(need) / float64(sh.total)
}

// peersOutstanding is what every live peer may still spend before its next
// sync: its claim and its share of budget a sliding window has released
// since, or, in a window it has not synced in, its opening or presumed
// share. Each peer admits the floor of its share of released budget, so the
// shares are summed whole and rounded up once.
func peersOutstanding(t *Table, x *shared, alive func(uint32) bool, sh shares, now, idx int64, view window.Counts) int64 {
	live, count := t.live.Load(), t.rule.Count
	fixed := t.rule.Type == window.Fixed
	var outstanding int64
	var released float64
	known := int32(0)
	for i := range x.peers {
		p := &x.peers[i]
		if !alive(p.inc) {
			continue
		}
		known++
		if !p.heard || fixed && p.claimWin != idx {
			if p.opens {
				outstanding += p.opening
			} else {
				outstanding += presumed(count, live, p.need, p.heard)
			}
			continue
		}
		outstanding += p.claim
		if !fixed {
			// Decay released since the peer announced is partly its own.
			dt := float64(max(now-p.claimAt, 0)) / float64(t.rule.Window)
			released += sh.of(p.need) * float64(view.Prev) * min(dt, 1)
		}
	}
	outstanding += int64(math.Ceil(released))
	// Live peers that have never spoken of this key hold their equal share.
	return outstanding + int64(max(live-1-known, 0))*presumed(count, live, 0, false)
}

// crossed gives back what this node's claim can no longer hold. A peer that
// synced within a latency of this node's last sync claimed from the same
// unclaimed budget without seeing this node's claim, nor this node its:
// when its news arrives, the pool this node sees, less every peer's latest
// claim, may be smaller than what this node has left to spend. Keeping only
// that much makes the two claims share the pool instead of each taking it.
// Of two nodes whose claims crossed only the one whose name sorts later
// runs this (Receive decides), so that the pool is given back once.
func (adaptive) crossed(t *Table, s *slot, now int64) {
	a := &s.x.alloc
	idx := window.Index(now, t.rule.Window)
	if !a.synced || idx != a.syncWin {
		return // before this node's first sync in the window: nothing claimed in it
	}
	at := moment{now: now, idx: idx, elapsed: window.Elapsed(now, t.rule.Window)}
	own, view := s.counts(idx)
	spent, allowance := a.allowance(t, own, at)
	left := allowance - spent
	if left <= 0 {
		return
	}
	sh := sharesOf(s.x, t.alive(), a.announcedNeed, t.live.Load())
	room := t.rule.Remaining(view, now) - peersOutstanding(t, s.x, t.alive(), sh, now, idx, view)
	// In a sliding window room counts the peers' shares of released budget
	// rounded up, so it may fall one short of what is really free.
	if t.rule.Type == window.Sliding {
		left--
	}
	if room < left {
		a.budget -= min(left-max(room, 0), a.budget)
	}
}
