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

// book is a key's accounts on its owner: one per other incarnation that
// reported the key or whose counts were passed on. The owner's own counts
// stay in its slot.
type book struct {
	accts []account
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
}

// committedAt is how much the incarnation may have admitted in window idx
// by moment c.
func (a *account) committedAt(c clock, w time.Duration) int64 {
	v, _ := a.committedRem(c, w)
	return v
}

// committedRem is committedAt and the fraction of a hit it rounded off, in
// units of 1/w.
func (a *account) committedRem(c clock, w time.Duration) (int64, uint64) {
	v, r := a.adm[1], uint64(0)
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
			a.adm = [2]int64{a.adm[1], 0}
		} else {
			a.prevCap, a.adm = 0, [2]int64{}
		}
		a.cur, a.was, a.hasWas = line{base: a.next}, line{}, false
		if shift > 1 {
			a.cur = line{}
		}
		a.next = 0
		if a.adm != [2]int64{} || a.prevCap != 0 || a.cur.base != 0 {
			kept = append(kept, a)
		}
	}
	clear(b.accts[len(kept):])
	b.accts = kept
}

// admitted returns what the fleet admitted in s's windows as the owner
// knows it.
func (b *book) admitted(s *slot) window.Counts {
	c := window.Counts{Prev: s.own[0], Curr: s.own[1]}
	for i := range b.accts {
		c.Prev += b.accts[i].adm[0]
		c.Curr += b.accts[i].adm[1]
	}
	return c
}

// committed is admitted with every grant counted as spent: what the fleet
// may have admitted by moment c.
func (b *book) committed(s *slot, c clock, w time.Duration) window.Counts {
	n := window.Counts{Prev: s.own[0], Curr: s.own[1]}
	var hi, lo uint64
	for i := range b.accts {
		a := &b.accts[i]
		n.Prev += max(a.adm[0], a.prevCap)
		v, r := a.committedRem(c, w)
		n.Curr += v
		var carry uint64
		lo, carry = bits.Add64(lo, r, 0)
		hi += carry
	}
	if hi > 0 || lo > 0 {
		// Each holder rounds its own grant down, but together they may
		// have admitted the sum of the fractions: round that up once.
		// Each fraction is below w, so hi is below the number of accounts,
		// far below w (at least a millisecond).
		q, r := bits.Div64(hi, lo, uint64(w))
		n.Curr += int64(q)
		if r > 0 {
			n.Curr++
		}
	}
	return n
}

// needs is the key's demand per sync interval over the fleet.
func (b *book) needs(s *slot) int64 {
	n := s.o.need
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

// decideAsOwner decides on the key's owner, against everything the fleet
// may have admitted.
func (t *Table) decideAsOwner(s *slot, c clock, hits int64) window.Decision {
	b := s.o.book
	d := t.rule.DecideAt(b.committed(s, c, t.rule.Window), c.elapsed, hits)
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
	if p >= 0 {
		a.adm[p] = max(a.adm[p], e.Admitted)
	}
	if p == 1 {
		// A node decides only in its current window, so its count in the
		// one before is final: no grant there is left to spend.
		a.adm[0] = max(a.adm[0], e.Prev)
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
	n := b.committed(s, c, w)
	mine := a.committedAt(c, w)
	n.Curr -= mine - a.adm[1]
	free := t.rule.RemainingAt(n, c.elapsed)
	want := int64(0)
	if ask <= free {
		want = ask
	}
	rate := int64(0)
	generous := t.rule.Count >= spareFloor*int64(t.live.Load()) && a.need > 0
	if generous {
		total := max(b.needs(s), a.need)
		left := free - want
		if left > 0 {
			// Rounded up, so that the last hits of the room go too.
			want += min(2*a.need, (left*a.need+2*total-1)/(2*total), (left+1)/2)
		}
		if t.rule.Type == window.Sliding && n.Prev > 0 && 2*total > free {
			others := int64(0)
			for i := range b.accts {
				if o := &b.accts[i]; o != a {
					others += o.rate()
				}
			}
			rate = max(min(n.Prev-others, n.Prev*a.need/total), 0)
		}
		if t.rule.Type == window.Fixed && w-c.elapsed <= 2*t.rule.SyncInterval {
			nextFree := t.rule.Count - b.nextGranted() + a.next
			next = max(min(2*a.need, nextFree*a.need/(2*total), nextFree/2), 0)
		}
	}
	if a.hasWas {
		// Only add to the grant a may not have applied: hits on top of
		// it, on the same line.
		extra := max(a.adm[1]+want-a.cur.at(c.now, c.end, w), 0)
		return line{base: a.cur.base + extra, rate: a.cur.rate, from: a.cur.from}, next
	}
	// What a spent from its grant since its report is not in adm: carry
	// the old grant's value now, up to one interval of its demand, so
	// that a busy node loses nothing to the round trip.
	base := max(a.adm[1], min(a.cur.at(c.now, c.end, w), a.adm[1]+a.need))
	grant = line{base: base + min(want, max(free-(base-a.adm[1]), 0))}
	if rate > 0 {
		grant.rate, grant.from = rate, c.now
	}
	return grant, next
}
