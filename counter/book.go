package counter

import (
	"math/bits"
	"time"

	"github.com/sluicehq/sluice/window"
)

// spareFloor is the count per live node from which an owner grants hits
// beyond what is asked. Below it every hit past a node's grant is asked for,
// so that a small count behaves as one exact limiter: a grant held where it
// is not spent would refuse a request elsewhere that an exact limiter admits.
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

// book is a key's accounts on its owner: one per other incarnation that
// reported the key or whose counts were passed on. The owner's own counts
// stay in its slot. A key's standby keeps a book too, of the counts its
// owner sent it.
type book struct {
	accts []account
	// roundSum is the fleet's count in the current window as the book had
	// it at the owner's last round, and toldSum as it was last told to the
	// contributors that had not heard it; both modulo 2^32.
	roundSum, toldSum uint32
	// open is the opening every node had in the current window.
	open int64
}

// account is one incarnation's part of a key on its owner.
type account struct {
	inc uint32
	// adm is what the incarnation admitted in the slot's windows, as it
	// reported; prevCap what its grant in window idx−1 came to.
	adm     [2]int64
	prevCap int64
	// cur is the grant last sent for window idx; was the one before it,
	// while hasWas says the incarnation may not have applied cur yet and
	// so may still spend up to was.
	cur, was line
	hasWas   bool
	next     int64 // its grant for window idx+1
	need     int64 // its demand in its last sync interval
	// heard is the newest report's sequence, answered the last report
	// answered.
	heard, answered uint64
	// told is the fleet's count in the current window as the incarnation
	// was last told it, modulo 2^32; spread says the key's standby has
	// its counts.
	told   uint32
	spread bool
}

// committedAt is how much the incarnation may have admitted in window idx
// by moment c.
func (a *account) committedAt(c clock, w time.Duration) int64 {
	v, _ := a.committedRem(c, w, 0)
	return v
}

// committedRem is committedAt, counting the incarnation's opening open, and
// the fraction of a hit it rounded off, in units of 1/w.
func (a *account) committedRem(c clock, w time.Duration, open int64) (int64, uint64) {
	v, r := max(a.adm[1], open), uint64(0)
	for i, l := range [2]line{a.cur, a.was} {
		if i == 1 && !a.hasWas {
			break
		}
		lv, lr := l.atRem(c.now, c.end, w)
		if lv > v || lv == v && lr > r {
			v, r = lv, lr
		}
	}
	return v, r
}

func (a *account) rate() int64 {
	if a.hasWas {
		return max(a.cur.rate, a.was.rate)
	}
	return a.cur.rate
}

func (b *book) account(inc uint32) *account {
	for i := range b.accts {
		if b.accts[i].inc == inc {
			return &b.accts[i]
		}
	}
	b.accts = append(b.accts, account{inc: inc})
	return &b.accts[len(b.accts)-1]
}

func (b *book) roll(shift, oldEnd int64, w time.Duration) {
	kept := b.accts[:0]
	for _, a := range b.accts {
		if shift == 1 {
			a.prevCap = a.committedAt(clock{now: oldEnd, end: oldEnd}, w)
			if a.adm[1] > 0 {
				// It may have spent all its opening, as far as the owner
				// knows; one that admitted nothing here leaves its
				// account and is held back for as a node unheard of.
				a.prevCap = max(a.prevCap, b.open)
			}
			a.adm = [2]int64{a.adm[1], 0}
		} else {
			a.prevCap, a.adm = 0, [2]int64{}
		}
		a.cur, a.was, a.hasWas = line{base: a.next}, line{}, false
		if shift > 1 {
			a.cur = line{}
		}
		a.next, a.told, a.spread = 0, 0, false
		if a.adm != [2]int64{} || a.prevCap != 0 || a.cur.base != 0 {
			kept = append(kept, a)
		}
	}
	clear(b.accts[len(kept):])
	b.accts = kept
	b.roundSum, b.toldSum = 0, 0
}

// admitted returns what the fleet admitted in s's windows as the owner
// knows it: its own counts and its accounts', or, while its accounts are
// still filling after the key moved here, what the previous owner last
// said the others had admitted.
func (b *book) admitted(s *slot) window.Counts {
	var c window.Counts
	for i := range b.accts {
		c.Prev += b.accts[i].adm[0]
		c.Curr += b.accts[i].adm[1]
	}
	c.Prev = s.own[0] + max(c.Prev, s.o.others[0])
	c.Curr = s.own[1] + max(c.Curr, s.o.others[1])
	return c
}

// committed is admitted with every grant counted as spent: what the fleet
// may have admitted by moment c, each node's opening included.
func (t *Table) committed(s *slot, c clock) window.Counts {
	open := t.opening()
	unheard := int64(0)
	if open > 0 {
		unheard = int64(t.live.Load()) - 1
		alive := t.alive()
		for i := range s.o.book.accts {
			if alive(s.o.book.accts[i].inc) {
				unheard--
			}
		}
	}
	s.o.book.open = open
	n := s.o.book.committed(s, c, t.rule.Window, open)
	n.Curr += max(unheard, 0) * open
	n.Prev += max(unheard, 0) * open
	return n
}

// committed is admitted with every grant counted as spent, and every
// account's opening: what the fleet may have admitted by moment c, less the
// openings of live nodes that have no account.
func (b *book) committed(s *slot, c clock, w time.Duration, open int64) window.Counts {
	var n window.Counts
	var hi, lo uint64
	for i := range b.accts {
		a := &b.accts[i]
		n.Prev += max(a.adm[0], a.prevCap)
		v, r := a.committedRem(c, w, open)
		n.Curr += v
		var carry uint64
		lo, carry = bits.Add64(lo, r, 0)
		hi += carry
	}
	if hi > 0 || lo > 0 {
		// Each holder admits whole hits only, but a fraction of a hit the
		// owner leaves unclaimed now becomes a whole hit of some holder's
		// later: the fractions count, rounded up once. Each fraction is
		// below w, so hi is below the number of accounts, far below w (at
		// least a millisecond).
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
	for i := range b.accts {
		n += b.accts[i].need
	}
	return n
}

func (b *book) nextGranted() int64 {
	n := int64(0)
	for i := range b.accts {
		n += b.accts[i].next
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
	b := s.o.book
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
	b := s.o.book
	a := b.account(inc)
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
		a.prevCap = 0
	}
	if seq < a.heard {
		return Entry{}, false
	}
	a.heard = seq
	if e.Told >= a.answered {
		a.hasWas = false
	}
	if a.answered == 0 && p == 1 && (e.Grant > 0 || e.Rate > 0) {
		// First word from this incarnation: it may hold a grant from an
		// earlier owner, which counts until it applies this answer.
		a.was, a.hasWas = line{base: e.Grant, rate: e.Rate, from: e.RateFrom}, true
	}
	a.need = min(e.Need, t.rule.Count)
	grant, next := t.grantFor(s, a, c, e.Ask)
	if !a.hasWas && grant != a.cur {
		// Until the incarnation applies the new grant it spends the old.
		a.was, a.hasWas = a.cur, true
	}
	a.cur = grant
	a.next = max(a.next, next)
	if p == 1 && e.Ask > 0 && grant.at(c.now, c.end, t.rule.Window) >= e.Admitted+e.Ask {
		// A granted question is a check waiting for this answer: it is
		// admitted as soon as the answer lands, so count it now and what
		// the fleet is told it has left is not a round behind.
		a.adm[1] = max(a.adm[1], e.Admitted+e.Ask)
	}
	a.answered = seq
	adm := b.admitted(s)
	a.told = uint32(adm.Curr)
	return Entry{Key: s.key, Window: s.idx, Admitted: adm.Curr - a.adm[1], Prev: adm.Prev - a.adm[0],
		Grant: grant.base, Rate: grant.rate, RateFrom: grant.from, Next: next, Told: seq}, true
}

// grantFor works out a's new grant: what it asks for if that fits, plus,
// where the count is large enough for it, a share of the room by demand,
// never more than half of what is left so that other nodes find room too.
// In a saturated sliding window the grant also grows with time, by a share
// of what the previous window's decay releases. Near the end of a fixed
// window it also grants from the next one, so that busy nodes need not ask
// on its first hits. While a may not have applied its last grant, the new
// one only adds to it.
func (t *Table) grantFor(s *slot, a *account, c clock, ask int64) (grant line, next int64) {
	b := s.o.book
	w := t.rule.Window
	n := t.committed(s, c)
	mine, _ := a.committedRem(c, w, t.opening())
	n.Curr -= mine - a.adm[1]
	// Room must last to the window's end, where the lines granted have
	// grown the most and the previous window's count has decayed away.
	mineEnd, _ := a.committedRem(c.atEnd(w), w, t.opening())
	endFree := t.endRoom(s, c) + mineEnd - a.adm[1]
	free := min(t.rule.RemainingAt(n, c.elapsed), endFree)
	want := int64(0)
	if ask <= free {
		want = ask
	}
	rate := int64(0)
	if generous := t.rule.Count >= spareFloor*int64(t.live.Load()) && a.need > 0; generous {
		total := max(b.needs(s), a.need)
		left := free - want
		if left > 0 {
			// Rounded up, so that the last hits of the room go too.
			want += min(2*a.need, mulDivUp(left, a.need, 2*total), (left+1)/2)
		}
		if t.rule.Type == window.Sliding && n.Prev > 0 && 2*total > free {
			others := int64(0)
			for i := range b.accts {
				if o := &b.accts[i]; o != a {
					others += o.rate()
				}
			}
			rate = max(min(n.Prev-others, mulDiv(n.Prev, a.need, total)), 0)
		}
		if t.rule.Type == window.Fixed && w-c.elapsed <= 2*t.rule.SyncInterval {
			nextFree := t.rule.Count - t.nextOpenings() - b.nextGranted() + a.next
			next = max(min(2*a.need, mulDiv(max(nextFree, 0), a.need, 2*total), nextFree/2), 0)
		}
	}
	if a.hasWas {
		// Only add to the grant a may not have applied: hits on top of
		// it, on the same line.
		extra := min(max(a.adm[1]+want-a.cur.at(c.now, c.end, w), 0), max(t.endRoom(s, c), 0))
		return line{base: a.cur.base + extra, rate: a.cur.rate, from: a.cur.from}, next
	}
	// What a spent from its grant since its report is not in adm: carry
	// the old grant's value now, up to one interval of its demand, so
	// that a busy node loses nothing to the round trip.
	base := max(a.adm[1], min(a.cur.at(c.now, c.end, w), a.adm[1]+a.need))
	grant = line{base: base + min(want, max(free-(base-a.adm[1]), 0))}
	if left := c.end - c.now; rate > 0 && left > 0 {
		// What the line adds by the window's end must fit the room left
		// there after its base.
		room := max(endFree-(grant.base-a.adm[1]), 0)
		hi, lo := bits.Mul64(uint64(room), uint64(w))
		if hi < uint64(left) {
			q, _ := bits.Div64(hi, lo, uint64(left))
			rate = min(rate, int64(min(q, uint64(maxEntry))))
		}
		if rate > 0 {
			grant.rate, grant.from = rate, c.now
		}
	}
	return grant, next
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
