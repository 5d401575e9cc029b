package window

import (
	"math/big"
	"time"
)

// reference is a deliberately slow limiter for one key, written from the
// README's definitions alone and sharing no arithmetic with Decide: it
// keeps every admitted check's time and hits, and answers each question by
// counting them again in exact (big integer) arithmetic.
//
//   - A moment t falls in window floor(t / w): windows are epoch-aligned.
//   - The estimate at t is curr for a fixed window, and
//     prev × (1 − elapsed/w) + curr for a sliding one, where curr and prev
//     are the hits admitted in t's window and the one before, and elapsed
//     is how far t is into its window.
//   - need hits fit at t when need ≤ count and estimate + need ≤ count.
//   - Remaining is floor(count − estimate), at least 0, after the check.
//   - RetryAfter, for a refusal of hits that could ever fit, is the least
//     whole number of nanoseconds after which they fit with nothing else
//     arriving; ResetAfter the least after which the estimate is 0.
//
// Both waits are found by binary search, which is sound because with no
// traffic the estimate never grows: it falls within a window, and at a
// boundary curr becomes prev at full weight, so it is continuous there.
type reference struct {
	count   int64
	w       int64
	sliding bool
	// admitted holds every admitted check still in the current or previous
	// window of the last check; older ones can never count again, since
	// time only moves forward, and are dropped to keep the reference fast.
	admitted []stamp
}

// stamp is one admitted check: when, the window that was, and how many
// hits.
type stamp struct{ at, window, hits int64 }

// refDecision is what the reference answers for one check.
type refDecision struct {
	allowed                bool
	remaining              int64
	retryAfter, resetAfter time.Duration
}

// windowOf is the window t falls in: floor(t / w), by big.Int's Euclidean
// division, which floors for a positive divisor.
func (r *reference) windowOf(t int64) int64 {
	q := new(big.Int).Div(big.NewInt(t), big.NewInt(r.w))
	return q.Int64()
}

// scaled is the estimate at t times w, exactly, as an integer: curr × w for
// a fixed window, prev × (w − elapsed) + curr × w for a sliding one. (The
// estimate is a fraction of w; scaling by w keeps the reference in
// integers without rounding anything.)
func (r *reference) scaled(t int64) *big.Int {
	idx := r.windowOf(t)
	var prev, curr int64
	for _, s := range r.admitted {
		switch s.window {
		case idx:
			curr += s.hits
		case idx - 1:
			prev += s.hits
		}
	}
	w := big.NewInt(r.w)
	est := new(big.Int).Mul(big.NewInt(curr), w)
	if r.sliding && prev > 0 {
		elapsed := new(big.Int).Mod(big.NewInt(t), w) // Euclidean: in [0, w)
		left := new(big.Int).Sub(w, elapsed)
		est.Add(est, left.Mul(left, big.NewInt(prev)))
	}
	return est
}

// fits reports whether need hits fit at t: need ≤ count and
// estimate + need ≤ count, that is estimate × w ≤ (count − need) × w.
func (r *reference) fits(t, need int64) bool {
	if need > r.count {
		return false
	}
	room := new(big.Int).Mul(big.NewInt(r.count-need), big.NewInt(r.w))
	return r.scaled(t).Cmp(room) <= 0
}

// least is the least wait in [0, 2w] after now for which ok holds, given
// that ok holds at 2w and, once it holds, holds for every longer wait.
func (r *reference) least(now int64, ok func(t int64) bool) time.Duration {
	lo, hi := int64(0), 2*r.w // ok(now + hi) holds
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(now + mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return time.Duration(lo)
}

// allow decides hits at now, as Decide defines a check: hits = 0 asks for
// one hit without spending; admitted hits are recorded.
func (r *reference) allow(now, hits int64) refDecision {
	r.forget(now)
	need := max(hits, 1)
	var d refDecision
	d.allowed = r.fits(now, need)
	if d.allowed && hits > 0 {
		r.admitted = append(r.admitted, stamp{at: now, window: r.windowOf(now), hits: hits})
	}
	// floor(count − estimate) = floor((count × w − estimate × w) / w), by
	// Euclidean division, which floors for a positive divisor.
	w := big.NewInt(r.w)
	left := new(big.Int).Sub(new(big.Int).Mul(big.NewInt(r.count), w), r.scaled(now))
	d.remaining = max(left.Div(left, w).Int64(), 0)
	if !d.allowed && need <= r.count {
		d.retryAfter = r.least(now, func(t int64) bool { return r.fits(t, need) })
	}
	d.resetAfter = r.least(now, func(t int64) bool { return r.scaled(t).Sign() == 0 })
	return d
}

// add records hits admitted elsewhere at now, without a decision.
func (r *reference) add(now, hits int64) {
	r.forget(now)
	r.admitted = append(r.admitted, stamp{at: now, window: r.windowOf(now), hits: hits})
}

// forget drops the checks that can no longer count at now or later.
func (r *reference) forget(now int64) {
	idx := r.windowOf(now)
	kept := r.admitted[:0]
	for _, s := range r.admitted {
		if s.window >= idx-1 {
			kept = append(kept, s)
		}
	}
	r.admitted = kept
}
