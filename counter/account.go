package counter

import (
	"cmp"
	"slices"
	"time"
)

// book is a key's accounts on its owner: one per other incarnation that
// reported the key or whose counts were passed on. The owner's own counts
// stay in its slot. A key's standby keeps a book too, of the counts of
// incarnations no longer live that the owner sent it.
//
// An owner holds a book for each key it owns, with an account per node that
// touched the key, so accounts are kept small: what only some keys need
// (grants that grow with time, grants in the next window) is kept beside
// them, in lines, only once some account needs it.
type book struct {
	accts []account
	// lines, when not nil, is as long as accts and holds, for each
	// account, what its grants need beyond their bases.
	lines *[]acctLine
	// roundSum is the fleet's count in the current window as the book had
	// it at the owner's last round, and toldSum as it was last told to the
	// contributors that had not heard it; both modulo 2^16.
	roundSum, toldSum uint16
	// standby is the key's standby, on its owner.
	standby uint32
	// agg holds the sums of a big book.
	agg *bookSums
}

// account is one incarnation's part of a key on its owner.
type account struct {
	inc uint32
	// told is the fleet's count in the current window as the incarnation
	// was last told it, modulo 2^16: should the count move on by a multiple
	// of that between two rounds, a quiet node's view waits for its next
	// report.
	told uint16
	need uint16 // its demand per sync interval, saturating
	// adm is what the incarnation admitted in the slot's windows, as it
	// reported.
	adm [2]int64
	// cur is the base of the grant last sent for window idx. held is, until
	// the incarnation has reported in window idx (reported), what its grant
	// in window idx−1 came to; after, the base of the grant before cur,
	// while hasWas says it may not have applied cur yet and so may still
	// spend up to that one.
	cur, held int64
	// seq is the sequence of the newest report heard and answered, modulo
	// 2^32 (compared with seqBefore), 0 for none.
	seq uint32
	// spread says the key's standby has its counts. owed says the
	// incarnation is to be told the fleet's counts at the next round
	// whatever it was last told: what was sent it may never have arrived
	// (a broken stream, or sent before this node counted it live).
	hasWas, spread, reported, owed bool
}

// seq32 is a delta sequence as an account keeps it: modulo 2^32, never 0.
func seq32(seq uint64) uint32 {
	if v := uint32(seq); v != 0 {
		return v
	}
	return 1
}

// seqBefore reports whether sequence a (modulo 2^32) comes before b: one
// sender's sequences of reports on one key never run 2^31 apart.
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

// acctLine is what an account's grants need beyond their bases: how each
// grows with time (a saturated sliding window), and the grant for the
// next window (the end of a busy fixed one).
type acctLine struct {
	curRate, curFrom, curStop, wasRate, wasFrom, wasStop, next int64
}

// prevCap is what the incarnation's grant in window idx−1 came to, while
// it may still have been spending it.
func (a *account) prevCap() int64 {
	if a.reported {
		return 0
	}
	return a.held
}

// lineOf returns account i's line extras, zero when it has none.
func (b *book) lineOf(i int) acctLine {
	if b.lines == nil {
		return acctLine{}
	}
	return (*b.lines)[i]
}

// curLine is account i's grant.
func (b *book) curLine(i int) line {
	l := b.lineOf(i)
	return line{base: b.accts[i].cur, rate: l.curRate, from: l.curFrom, stop: l.curStop}
}

// wasLine is account i's grant before the one it may not have applied;
// only while hasWas.
func (b *book) wasLine(i int) line {
	l := b.lineOf(i)
	return line{base: b.accts[i].held, rate: l.wasRate, from: l.wasFrom, stop: l.wasStop}
}

// next is account i's grant for the next window.
func (b *book) next(i int) int64 { return b.lineOf(i).next }

// setLines sets account i's grant, the grant before it (while hasWas),
// and its grant for the next window.
// The caller takes the account out of the sums around it (out, in).
func (b *book) setLines(i int, cur, was line, next int64) {
	a := &b.accts[i]
	a.cur = cur.base
	if a.hasWas {
		a.held = was.base
	}
	l := acctLine{curRate: cur.rate, curFrom: cur.from, curStop: cur.stop, next: next}
	if a.hasWas {
		l.wasRate, l.wasFrom, l.wasStop = was.rate, was.from, was.stop
	}
	if b.lines == nil {
		if l == (acctLine{}) {
			return
		}
		lines := make([]acctLine, len(b.accts))
		b.lines = &lines
	}
	(*b.lines)[i] = l
}

// find returns the index of inc's account, adding one if absent. Accounts
// are kept in order of incarnation, so that a book of hundreds finds one in
// a few steps.
func (b *book) find(inc uint32) int {
	i, ok := slices.BinarySearchFunc(b.accts, inc, func(a account, inc uint32) int { return cmp.Compare(a.inc, inc) })
	if ok {
		return i
	}
	b.accts = slices.Insert(b.accts, i, account{inc: inc})
	if b.lines != nil {
		*b.lines = slices.Insert(*b.lines, i, acctLine{})
	}
	if g := b.agg; g != nil && g.valid {
		// A fresh account counts for nothing yet but its opening, and
		// may be of a live incarnation.
		g.add(b, i, 1)
		g.live = -1
	}
	return i
}

// has reports whether the book has an account for inc.
func (b *book) has(inc uint32) bool {
	_, ok := slices.BinarySearchFunc(b.accts, inc, func(a account, inc uint32) int { return cmp.Compare(a.inc, inc) })
	return ok
}

// keep drops the accounts f rejects.
func (b *book) keep(f func(*account) bool) {
	kept := 0
	for i := range b.accts {
		if f(&b.accts[i]) {
			b.accts[kept] = b.accts[i]
			if b.lines != nil {
				(*b.lines)[kept] = (*b.lines)[i]
			}
			kept++
		}
	}
	clear(b.accts[kept:])
	b.accts = b.accts[:kept]
	if b.lines != nil {
		*b.lines = (*b.lines)[:kept]
	}
	b.stale()
}

// committedRem is how much account i may have admitted in window idx by
// moment c, counting its opening open, and the fraction of a hit that
// rounded off, in units of 1/w.
func (b *book) committedRem(i int, c clock, w time.Duration, open int64) (int64, uint64) {
	a := &b.accts[i]
	v, r := max(a.adm[1], open), uint64(0)
	lines := [2]line{b.curLine(i)}
	n := 1
	if a.hasWas {
		lines[1], n = b.wasLine(i), 2
	}
	for _, l := range lines[:n] {
		lv, lr := l.atRem(c.now, c.end, w)
		if lv > v || lv == v && lr > r {
			v, r = lv, lr
		}
	}
	return v, r
}

// rate is how fast account i's grants grow, the faster of them while it may
// spend either.
func (b *book) rate(i int) int64 {
	l := b.lineOf(i)
	if b.accts[i].hasWas {
		return max(l.curRate, l.wasRate)
	}
	return l.curRate
}

// roll moves the book to a window shift windows on, whose predecessor ended
// at oldEnd and gave every node an opening of open: a grant for the next
// window becomes the grant, what a grant came to is kept while its holder
// may still be spending it, and accounts left with nothing are dropped.
func (b *book) roll(shift, oldEnd int64, w time.Duration, open int64) {
	kept := 0
	for i := range b.accts {
		a := b.accts[i]
		next := b.next(i)
		if shift == 1 {
			v, _ := b.committedRem(i, clock{now: oldEnd, end: oldEnd}, w, 0)
			if a.adm[1] > 0 {
				// It may have spent all its opening, as far as the owner
				// knows; one that admitted nothing here leaves its
				// account and is held back for as a node unheard of.
				v = max(v, open)
			}
			a.held, a.adm = v, [2]int64{a.adm[1], 0}
		} else {
			a.held, a.adm, next = 0, [2]int64{}, 0
		}
		a.cur, a.hasWas, a.reported = next, false, false
		a.told, a.spread = 0, false
		if a.adm != [2]int64{} || a.held != 0 || a.cur != 0 {
			b.accts[kept] = a
			kept++
		}
	}
	clear(b.accts[kept:])
	b.accts = b.accts[:kept]
	// Lines start the window empty: a grant for the next window is now
	// the base of the grant.
	b.lines = nil
	b.roundSum, b.toldSum = 0, 0
	b.stale()
}

// bigBook is the number of accounts from which a book keeps running sums
// (bookSums) instead of walking its accounts for every answer: an owner
// answers each contributor's report, so a walk per answer costs O(N²) a
// key and interval in a fleet of N.
const bigBook = 16

// bookSums are a big book's sums over its accounts, kept as accounts
// change: what each answer needs, without a walk. Accounts whose grants
// grow with time (lined) are left out of static and walked, as only a
// saturated key has them.
type bookSums struct {
	valid bool
	open  int64 // the opening static, low and lowSum were made with
	adm   [2]int64
	prev  int64 // Σ max(adm[0], prevCap)
	need  int64
	next  int64
	rate  int64
	// static is Σ max(adm[1], cur, was) over accounts without lines; low
	// and lowSum count and sum those below open, which count as open.
	static, low, lowSum int64
	lined               int
	// live is how many accounts are of live incarnations, as of fleet
	// generation liveGen.
	live    int
	liveGen uint32
}

// staticOf is what account i counts for in the current window while its
// grants do not grow: its count or its grant, whichever is more.
func (b *book) staticOf(i int) int64 {
	a := &b.accts[i]
	v := max(a.adm[1], a.cur)
	if a.hasWas {
		v = max(v, a.held)
	}
	return v
}

// linedAt reports whether account i has a grant that grows with time.
func (b *book) linedAt(i int) bool {
	l := b.lineOf(i)
	return l.curRate > 0 || b.accts[i].hasWas && l.wasRate > 0
}

// add adds account i's part to the sums, times sign (1 or −1).
func (g *bookSums) add(b *book, i int, sign int64) {
	a := &b.accts[i]
	g.adm[0] += sign * a.adm[0]
	g.adm[1] += sign * a.adm[1]
	g.prev += sign * max(a.adm[0], a.prevCap())
	g.need += sign * int64(a.need)
	g.next += sign * b.next(i)
	g.rate += sign * b.rate(i)
	if b.linedAt(i) {
		g.lined += int(sign)
		return
	}
	v := b.staticOf(i)
	g.static += sign * v
	if v < g.open {
		g.low += sign
		g.lowSum += sign * v
	}
}

// sums returns the book's running sums for opening open, made afresh if
// they are stale, or nil for a small book, which its callers walk.
func (b *book) sums(open int64) *bookSums {
	if len(b.accts) < bigBook {
		b.agg = nil
		return nil
	}
	if b.agg == nil {
		b.agg = &bookSums{}
	}
	g := b.agg
	if !g.valid || g.open != open {
		*g = bookSums{valid: true, open: open, live: -1}
		for i := range b.accts {
			g.add(b, i, 1)
		}
	}
	return g
}

// out takes account i's part out of the sums before it changes; in puts it
// back after. Between them the sums are not to be read.
func (b *book) out(i int) {
	if g := b.agg; g != nil && g.valid {
		g.add(b, i, -1)
	}
}

func (b *book) in(i int) {
	if g := b.agg; g != nil && g.valid {
		g.add(b, i, 1)
	}
}

// stale makes the sums be made afresh at their next use, after a change to
// many accounts or to which accounts there are.
func (b *book) stale() {
	if b.agg != nil {
		b.agg.valid = false
	}
}
