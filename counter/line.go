package counter

import (
	"math/bits"
	"time"
)

// line is a grant that grows with time: base hits at from, and rate more
// per window length after it, until stop, or the window's end when stop is
// 0 or later. An owner of a saturated sliding-window key hands out the
// budget the previous window's decay releases as lines, so that nodes admit
// it as it is released instead of asking for each hit.
type line struct {
	base, rate, from, stop int64
}

// last is the moment the line stops growing in a window ending at end.
func (l line) last(end int64) int64 {
	if l.stop > 0 && l.stop < end {
		return l.stop
	}
	return end
}

// at is the line's value at moment t in a window of length w ending at end,
// rounded down: what its holder may have admitted by then.
func (l line) at(t, end int64, w time.Duration) int64 {
	v, _ := l.atRem(t, end, w)
	return v
}

// atRem is at and the fraction it rounded off, in units of 1/w: an owner
// adds up the fractions of many lines, so that what they admit together is
// counted exactly.
func (l line) atRem(t, end int64, w time.Duration) (int64, uint64) {
	end = l.last(end)
	if l.rate <= 0 || t <= l.from || end <= l.from {
		return l.base, 0
	}
	t = min(t, end)
	hi, lo := bits.Mul64(uint64(l.rate), uint64(t-l.from))
	if hi >= uint64(w) {
		return maxEntry, 0
	}
	q, r := bits.Div64(hi, lo, uint64(w))
	return l.base + int64(q), r
}

// until is how long after t the line first reaches v, or false if it does
// not before end.
func (l line) until(v, t, end int64, w time.Duration) (time.Duration, bool) {
	if l.at(t, end, w) >= v {
		return 0, true
	}
	if l.rate <= 0 || l.at(end, end, w) < v {
		return 0, false
	}
	// The first moment at which rate × (moment − from) ≥ (v − base) × w.
	hi, lo := bits.Mul64(uint64(v-l.base), uint64(w))
	q, r := bits.Div64(hi, lo, uint64(l.rate))
	if r != 0 {
		q++
	}
	return time.Duration(l.from + int64(q) - t), true
}
