package counter

import (
	"math"
	"math/bits"
	"time"

	"github.com/sluicehq/sluice/window"
)

// spareFloor is the count per live node from which a node's need covers a
// sync interval of its demand. Below it, a node that can ask its owner in
// time needs only what it is asked for during a round trip, and asks for
// every hit past that, so that a small count behaves as one exact limiter:
// a grant held where it is not spent would refuse a request elsewhere that
// an exact limiter admits.
const spareFloor = 20

// openingShare is the part of the count held back as openings: 1/100.
const openingShare = 100

// opening is how many hits a node may admit on a key in a window without a
// grant there and without asking: where the count is large enough, a
// hundredth of it shared over the live nodes, which the owner holds back
// for each node until it says what it admitted; none below. A key a node
// checks now and then costs it no question, and what the openings hold
// back, for as long as nodes leave them unused, is at most that hundredth.
func (t *Table) opening() int64 {
	return t.rule.Count / (openingShare * int64(max(t.live.Load(), 1)))
}

// admitted returns what the fleet admitted in s's windows as the owner
// knows it: its own counts and its accounts', or, while its accounts are
// still filling after the key moved here, what the previous owner last
// said the others had admitted.
func (b *book) admitted(s *slot) window.Counts {
	var c window.Counts
	if g := b.agg; g != nil && g.valid {
		c = window.Counts{Prev: g.adm[0], Curr: g.adm[1]}
	} else {
		for i := range b.accts {
			c.Prev += b.accts[i].adm[0]
			c.Curr += b.accts[i].adm[1]
		}
	}
	c.Prev = s.own[0] + max(c.Prev, s.o.others[0])
	c.Curr = s.own[1] + max(c.Curr, s.o.others[1])
	return c
}

// committed is admitted with every grant counted as spent: what the fleet
// may have admitted by moment c, each node's opening included.
func (t *Table) committed(s *slot, c clock) window.Counts {
	open := t.opening()
	b := s.o.bookOf()
	n := b.committed(s, c, t.rule.Window, open)
	if open > 0 {
		unheard := max(int64(t.live.Load())-1-int64(t.liveAccounts(b)), 0)
		n.Curr += unheard * open
		n.Prev += unheard * open
	}
	return n
}

// liveAccounts is how many of b's accounts are of live incarnations.
func (t *Table) liveAccounts(b *book) int {
	f := t.fleet.Load()
	g := b.sums(t.opening())
	if g != nil && g.live >= 0 && f != nil && g.liveGen == f.gen {
		return g.live
	}
	alive := t.alive()
	n := 0
	for i := range b.accts {
		if alive(b.accts[i].inc) {
			n++
		}
	}
	if g != nil && f != nil {
		g.live, g.liveGen = n, f.gen
	}
	return n
}

// committed is admitted with every grant counted as spent, and every
// account's opening: what the fleet may have admitted by moment c, less the
// openings of live nodes that have no account.
func (b *book) committed(s *slot, c clock, w time.Duration, open int64) window.Counts {
	var n window.Counts
	var hi, lo uint64
	g := b.sums(open)
	if g != nil {
		n.Prev = g.prev
		n.Curr = g.static - g.lowSum + g.low*open
	}
	if g == nil || g.lined > 0 {
		for i := range b.accts {
			if g != nil && !b.linedAt(i) {
				continue
			}
			if g == nil {
				n.Prev += max(b.accts[i].adm[0], b.accts[i].prevCap())
			}
			v, r := b.committedRem(i, c, w, open)
			n.Curr += v
			var carry uint64
			lo, carry = bits.Add64(lo, r, 0)
			hi += carry
		}
	}
	if (hi > 0 || lo > 0) && c.now < c.end {
		// Each holder admits whole hits only, but a fraction of a hit the
		// owner leaves unclaimed now becomes a whole hit of some holder's
		// later: the fractions count, rounded up once. At the window's
		// end there is no later: what the lines come to there, rounded
		// down each, is all their holders can admit in it. Each fraction
		// is below w, so hi is below the number of accounts, far below w
		// (at least a millisecond).
		q, r := bits.Div64(hi, lo, uint64(w))
		n.Curr += int64(q)
		if r > 0 {
			n.Curr++
		}
	}
	n.Prev = s.own[0] + max(n.Prev, s.o.others[0])
	n.Curr = s.own[1] + max(n.Curr, s.o.others[1])
	return n
}

// needs is the key's demand per sync interval over the fleet.
func (b *book) needs(s *slot) int64 {
	n := s.o.need()
	if g := b.agg; g != nil && g.valid {
		return n + g.need
	}
	for i := range b.accts {
		n += int64(b.accts[i].need)
	}
	return n
}

// nextGranted is what the book has granted in the next window.
func (b *book) nextGranted() int64 {
	if b.lines == nil {
		return 0
	}
	if g := b.agg; g != nil && g.valid {
		return g.next
	}
	n := int64(0)
	for i := range *b.lines {
		n += (*b.lines)[i].next
	}
	return n
}

// rates is how fast every account's grants but account i's grow together.
func (b *book) rates(i int) int64 {
	if g := b.agg; g != nil && g.valid {
		return g.rate - b.rate(i)
	}
	n := int64(0)
	for j := range b.accts {
		if j != i {
			n += b.rate(j)
		}
	}
	return n
}

// atEnd is the moment c's window ends, as a clock.
func (c clock) atEnd(w time.Duration) clock {
	return clock{now: c.end, end: c.end, elapsed: w}
}

// endRoom is how many more hits the window has room for at its end once
// every grant has grown as far as it will: grants that grow with time
// (lines) may outgrow what the previous window's decay frees, so room now is
// not room for the rest of the window. In a sliding window the end is the
// next window's start, where the whole count still weighs, and where every
// other node may spend its opening at once: that much stays free.
func (t *Table) endRoom(s *slot, c clock) int64 {
	room := t.rule.Count - t.committed(s, c.atEnd(t.rule.Window)).Curr
	if t.rule.Type == window.Sliding {
		room -= t.nextOpenings()
	}
	return room
}

// nextOpenings is what every other node may spend of the next window
// without asking: its opening there.
func (t *Table) nextOpenings() int64 {
	return int64(max(t.live.Load()-1, 0)) * t.opening()
}

// decideAsOwner decides on the key's owner, against everything the fleet
// may have admitted, now and by the window's end.
func (t *Table) decideAsOwner(s *slot, c clock, hits int64) window.Decision {
	b := s.o.bookOf()
	d := t.rule.DecideAt(t.committed(s, c), c.elapsed, hits)
	if d.Allowed && hits > t.endRoom(s, c) {
		d.Allowed, d.Remaining, d.RetryAfter = false, 0, t.rule.SyncInterval
	}
	adm := b.admitted(s)
	if d.Allowed {
		adm.Curr += hits
		d.Remaining = t.rule.RemainingAt(adm, c.elapsed)
		return d
	}
	if hits > 0 {
		if dv := t.rule.DecideAt(adm, c.elapsed, hits); dv.Allowed {
			// The room is held as grants not yet spent; holders give
			// back what they do not need at their next round.
			d.RetryAfter = t.rule.SyncInterval
		}
	}
	return d
}

// answer folds a report of the key from incarnation inc (the delta's
// sequence seq) into the owner's book and returns the answer, or false for a
// report older than one already answered.
func (t *Table) answer(s *slot, inc uint32, e *Entry, seq uint64, c clock) (Entry, bool) {
	b, i := s.o.accountOf(inc)
	a := &b.accts[i]
	b.out(i)
	p := s.pos(e.Window)
	if p >= 0 && a.adm[p] < e.Admitted {
		a.adm[p], a.spread = e.Admitted, false
	}
	if p == 1 {
		// A node decides only in its current window, so its count in the
		// one before is final: no grant there is left to spend.
		if a.adm[0] < e.Prev {
			a.adm[0], a.spread = e.Prev, false
		}
		if !a.reported {
			a.reported, a.held, a.hasWas = true, 0, false
		}
	}
	if a.seq != 0 && seqBefore(seq32(seq), a.seq) {
		b.in(i)
		return Entry{}, false
	}
	first := a.seq == 0
	if e.Told != 0 && !seqBefore(seq32(e.Told), a.seq) {
		a.hasWas = false
	}
	was := b.wasLine(i)
	if first && p == 1 && (e.Grant > 0 || e.Rate > 0) {
		// First word from this incarnation: it may hold a grant from an
		// earlier owner, which counts until it applies this answer.
		a.hasWas, was = true, line{base: e.Grant, rate: e.Rate, from: e.RateFrom, stop: e.RateUntil}
	}
	a.need = uint16(min(e.Need, t.rule.Count, math.MaxUint16))
	b.setLines(i, b.curLine(i), was, b.next(i))
	b.in(i)
	grant, next := t.grantFor(s, i, c, e.Ask, e.Pooled)
	a = &b.accts[i]
	b.out(i)
	if !a.hasWas && grant != b.curLine(i) {
		// Until the incarnation applies the new grant it spends the old.
		a.hasWas, was = true, b.curLine(i)
	}
	b.setLines(i, grant, was, max(b.next(i), next))
	if p == 1 && e.Ask > 0 && grant.at(c.now, c.end, t.rule.Window) >= e.Admitted+e.Ask {
		// A granted question is a check waiting for this answer: it is
		// admitted as soon as the answer lands, so count it now and what
		// the fleet is told it has left is not a round behind.
		a.adm[1] = max(a.adm[1], e.Admitted+e.Ask)
	}
	a.seq = seq32(seq)
	b.in(i)
	adm := b.admitted(s)
	a.told, a.owed = uint16(adm.Curr), false
	return Entry{Key: s.key, Window: s.idx, Admitted: adm.Curr - a.adm[1], Prev: adm.Prev - a.adm[0],
		Grant: grant.base, Rate: grant.rate, RateFrom: grant.from, RateUntil: grant.stop, Next: next, Told: seq}, true
}

// grantFor works out a's new grant: what it asks for if that fits, plus a
// share of the room by its need (see reportEntry), never more than half of
// what is left so that other nodes find room too.
// In a saturated sliding window the grant also grows with time, by a share
// of what the previous window's decay releases. Near the end of a fixed
// window it also grants from the next one, so that busy nodes need not ask
// on its first hits. While a may not have applied its last grant, the new
// one only adds to it. A node that asks faster than its checks arrive
// (pooled) has its line stop where the window's last sync interval
// starts: from there, what the decay releases goes to whichever node asks
// first, as one exact limiter would give it to whichever check comes first,
// instead of to lines whose holders' next checks may come after the end.
func (t *Table) grantFor(s *slot, i int, c clock, ask int64, pooled bool) (grant line, next int64) {
	b := s.o.bookOf()
	a := &b.accts[i]
	need := int64(a.need)
	w := t.rule.Window
	n := t.committed(s, c)
	mine, _ := b.committedRem(i, c, w, t.opening())
	n.Curr -= mine - a.adm[1]
	// Room must last to the window's end, where the lines granted have
	// grown the most and the previous window's count has decayed away.
	mineEnd, _ := b.committedRem(i, c.atEnd(w), w, t.opening())
	endFree := t.endRoom(s, c) + mineEnd - a.adm[1]
	free := min(t.rule.RemainingAt(n, c.elapsed), endFree)
	want := int64(0)
	if ask <= free {
		want = ask
	}
	stop := c.end
	if pooled {
		stop = t.poolStart(c)
	}
	rate := int64(0)
	if need > 0 {
		total := max(b.needs(s), need)
		if t.rule.Type == window.Sliding && n.Prev > 0 && 2*total > free && c.now < stop {
			rate = max(min(n.Prev-b.rates(i), lineRate(n.Prev, need, total, a.inc, s.idx)), 0)
		}
		left := free - want
		if left > 0 && rate > 0 {
			// The room goes out over the owner's round, to the nodes
			// still to be answered in it, whose reports come spread
			// over the round: shares of the whole fleet's need would
			// leave a part of the room with the owner, round after round,
			// while the released budget piles up there unspent. Each
			// node's part of it stays within its need.
			every := int64(t.syncEvery())
			if since := c.now - (t.nextSync.Load() - every); since >= 0 && since < every {
				total = max(need, mulDivUp(total, every-since, every))
			}
		}
		if left > 0 {
			// A share of half the room by demand, so that the others find
			// room too, but at least the node's need where every node's
			// fits the room: a node that cannot ask in time (its owner a
			// long round trip away) lives on these grants alone. Rounded
			// up, so that the last hits of the room go too.
			share := max(mulDivUp(left, need, 2*total), min(need, mulDivUp(left, need, total)))
			if rate > 0 && pooled {
				// A line brings the node its part of what the decay
				// releases as it is released, and the node asks faster
				// than its checks arrive: of the room now, it needs only
				// what its line does not cover in a sync interval. More
				// would sit unspent in its grant while the owner's own
				// checks, and other nodes' questions, find the window
				// full. A node far from its owner keeps its share: it
				// cannot ask in time for more.
				share = min(share, max(need-mulDiv(rate, int64(t.rule.SyncInterval), int64(w)), 0))
			}
			if rate > 0 {
				share = min(share, need)
			}
			want += min(2*need, share, (left+1)/2)
		}
		if t.rule.Type == window.Fixed && w-c.elapsed <= 2*t.rule.SyncInterval {
			nextFree := t.rule.Count - t.nextOpenings() - b.nextGranted() + b.next(i)
			next = max(min(2*need, mulDiv(max(nextFree, 0), need, 2*total), nextFree/2), 0)
		}
	}
	cur := b.curLine(i)
	if a.hasWas {
		// Only add to the grant a may not have applied: hits on top of
		// it, on the same line, which must still start within the room
		// (see lineRoom).
		extra := min(max(a.adm[1]+want-cur.at(c.now, c.end, w), 0), max(t.endRoom(s, c), 0))
		if cur.rate > 0 {
			room := t.lineRoom(n, cur.from-(c.end-int64(w)))
			extra = min(extra, max(a.adm[1]+room-cur.base, 0))
		}
		return line{base: cur.base + extra, rate: cur.rate, from: cur.from, stop: cur.stop}, next
	}
	// What a spent from its grant since its report is not in adm: carry
	// the old grant's value now, up to one interval of its demand, so
	// that a busy node loses nothing to the round trip.
	base := max(a.adm[1], min(cur.at(c.now, c.end, w), a.adm[1]+need))
	// A grant of room: the carried hits and the new share overlap, for
	// what the node has not spent of the carry is what the share is for;
	// granting both would hold up to three intervals of its demand, which
	// the rest of the fleet, the owner first, goes without. A grant that
	// grows with time (a saturated sliding window) is sized by its line,
	// and its carry is what the line released during the round trip.
	grant = line{base: a.adm[1] + max(base-a.adm[1], min(want, free))}
	if rate > 0 {
		grant = line{base: base + min(want, max(free-(base-a.adm[1]), 0))}
	}
	if left := stop - c.now; rate > 0 && left > 0 {
		// What the line adds by the moment it stops must fit the room
		// left at the window's end after its base.
		room := max(endFree-(grant.base-a.adm[1]), 0)
		hi, lo := bits.Mul64(uint64(room), uint64(w))
		if hi < uint64(left) {
			q, _ := bits.Div64(hi, lo, uint64(left))
			rate = min(rate, int64(min(q, uint64(maxEntry))))
		}
		if rate > 0 {
			grant.rate, grant.from = rate, c.now
			if stop < c.end {
				grant.stop = stop
			}
		}
	}
	return grant, next
}

// lineRate is a node's part of what the decay of the previous window's
// count releases, prev × need ÷ total, in whole hits a window: rounded up
// or down as a hash of the node's incarnation and the window says, up in
// proportion to the fraction, so that the lines of many nodes add up to
// the decay instead of falling short of it by up to a hit each (at 64
// nodes, 63 lines of 6.76 hits rounded down release 378 of 426). A hash,
// not chance, keeps the owner's answers a function of what it heard.
func lineRate(prev, need, total int64, inc uint32, idx int64) int64 {
	hi, lo := bits.Mul64(uint64(prev), uint64(need))
	if hi >= uint64(total) {
		return maxEntry
	}
	q, rem := bits.Div64(hi, lo, uint64(total))
	h := uint64(inc)*0x9E3779B97F4A7C15 ^ uint64(idx)*0xC2B2AE3D27D4EB4F
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	if h%uint64(total) < rem {
		q++
	}
	return int64(min(q, uint64(maxEntry)))
}

// lineRoom is how far past n.Curr a grant that grows with time may start,
// elapsed into the window: the room one exact limiter has then by n, which
// may be below zero where counts already admitted (an opening, a grant
// carried over) fill more than it. A line started there, growing no faster
// than the previous window's count decays, stays within what one exact
// limiter admits for the rest of the window; one started above it stays
// above. n.Prev may be a bound above that count (a node's grant in the
// window before, while it has not said what it spent): the room is then
// below the true one; but a line's rate is drawn from that bound too, and
// such a line grows faster than the count truly decays, a known gap (see
// TestOwnedStalledLinksNeverOvershoot).
func (t *Table) lineRoom(n window.Counts, elapsed int64) int64 {
	w := int64(t.rule.Window)
	elapsed = min(max(elapsed, 0), w)
	held := n.Prev - mulDiv(n.Prev, elapsed, w)
	return t.rule.Count - n.Curr - held
}

// poolStart is where the last sync interval of c's window starts: from
// there a pooled node's line stops growing.
func (t *Table) poolStart(c clock) int64 {
	return max(c.end-int64(t.rule.SyncInterval), c.end-int64(t.rule.Window))
}

// mulDiv is a × b ÷ c rounded down, for non-negative a and b and positive
// c, without overflow in the product; a quotient beyond maxEntry is
// maxEntry.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return maxEntry
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(min(q, uint64(maxEntry)))
}

// mulDivUp is mulDiv rounded up.
func mulDivUp(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return maxEntry
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r > 0 {
		q++
	}
	return int64(min(q, uint64(maxEntry)))
}
