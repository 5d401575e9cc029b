package window

import (
	"fmt"
	"math/bits"
	"time"
)

// Counts are one key's hits in the window that a moment falls in (Curr) and
// in the window before it (Prev).
type Counts struct {
	Prev, Curr int64
}

// Decision is the answer to one check.
type Decision struct {
	// Allowed reports whether the hits were admitted (for hits = 0: whether
	// one hit would be).
	Allowed bool
	// Limit is the rule's Count.
	Limit int64
	// Remaining is how many more hits would be admitted now, after this one.
	// With owner allocation it is what the whole fleet has left, as this
	// node last heard from the key's owner plus its own checks since.
	Remaining int64
	// ResetAfter is how long until the whole Limit is available again if no
	// more hits arrive.
	ResetAfter time.Duration
	// RetryAfter is, for a refusal, how long until the same hits would be
	// admitted if no other hits arrive; zero when Allowed. With owner
	// allocation it is worked out from the fleet's counts, so a retry then
	// is admitted on any node unless others took the room first.
	RetryAfter time.Duration
	// Path says what produced the decision.
	Path Path
	// At is when the decision was made, in Unix nanoseconds on the clock
	// that made it: the deciding node's, or for a strict decision the
	// leader's, which every replica of the log shares. Zero when unknown.
	At int64
}

// Path says which mechanism produced a decision.
type Path uint8

const (
	// PathLocal is a decision made on the node that received the check,
	// from its view: every batched rule, and any rule on a lone node.
	PathLocal Path = iota
	// PathStrict is a decision made through the Raft log: exact.
	PathStrict
	// PathFailOpen is an admission because no strict leader was reachable
	// and the rule fails open.
	PathFailOpen
	// PathFailClosed is a refusal because no strict leader was reachable
	// and the rule fails closed.
	PathFailClosed
	// PathFailLocal is a decision made on this node alone because no strict
	// leader was reachable and the rule falls back to local enforcement.
	PathFailLocal
)

// String returns the path's name.
func (p Path) String() string {
	switch p {
	case PathLocal:
		return "local"
	case PathStrict:
		return "strict"
	case PathFailOpen:
		return "fail-open"
	case PathFailClosed:
		return "fail-closed"
	case PathFailLocal:
		return "fail-local"
	}
	return fmt.Sprintf("Path(%d)", uint8(p))
}

// Decide answers whether hits fit in the rule's window at moment now (Unix
// nanoseconds), given the key's counts for the window now falls in and the
// one before. It does not record anything: the caller adds the hits when
// Allowed is true and hits > 0.
//
// hits = 0 asks for the state: Allowed and RetryAfter then answer for one hit.
// hits > Count can never be admitted: Allowed is false and RetryAfter zero,
// because no wait helps.
//
// Sliding windows are decided exactly in integer arithmetic, with the
// estimate prev × (1 − elapsed/window) + curr; RetryAfter is rounded up to the
// nanosecond, so a retry at exactly RetryAfter fits and one a nanosecond
// earlier does not.
func (r *Rule) Decide(c Counts, now int64, hits int64) Decision {
	d := r.DecideAt(c, Elapsed(now, r.Window), hits)
	d.At = now
	return d
}

// DecideAt is Decide for a caller that already knows how far into its window
// the moment is (see Position).
func (r *Rule) DecideAt(c Counts, elapsed time.Duration, hits int64) Decision {
	need := max(hits, 1)
	rem := uint64(r.Window - elapsed) // in (0, w]
	decayed := r.held(c.Prev, rem)
	d := Decision{Limit: r.Count}
	if need <= r.Count {
		d.Allowed = decayed+c.Curr+need <= r.Count
	}
	if d.Allowed && hits > 0 {
		c.Curr += hits
	}
	d.Remaining = max(r.Count-c.Curr-decayed, 0)
	d.ResetAfter = r.resetAfter(c, rem)
	if !d.Allowed && need <= r.Count {
		d.RetryAfter = r.retryAfter(c, rem, uint64(r.Window), need)
	}
	return d
}

// Position returns the window the moment now falls in and how far into it
// the moment is, with one division.
func Position(now int64, w time.Duration) (idx int64, elapsed time.Duration) {
	idx = Index(now, w)
	return idx, time.Duration(now - idx*int64(w))
}

// Fits reports whether hits (≥ 1) fit at moment now given the counts.
func (r *Rule) Fits(c Counts, now int64, hits int64) bool {
	rem := uint64(r.Window - Elapsed(now, r.Window))
	return hits <= r.Count && r.held(c.Prev, rem)+c.Curr+hits <= r.Count
}

// Remaining returns how many hits would fit at moment now given the counts.
func (r *Rule) Remaining(c Counts, now int64) int64 {
	return r.RemainingAt(c, Elapsed(now, r.Window))
}

// RemainingAt is Remaining for a moment elapsed into its window.
func (r *Rule) RemainingAt(c Counts, elapsed time.Duration) int64 {
	return max(r.Count-c.Curr-r.held(c.Prev, uint64(r.Window-elapsed)), 0)
}

// Headroom returns count − estimate at moment now rounded up (it may be
// negative). A gateway that caches a remaining count in floating point and
// admits while "remaining − admitted > 0" admits exactly Headroom hits.
func (r *Rule) Headroom(c Counts, now int64) int64 {
	rem := uint64(r.Window - Elapsed(now, r.Window))
	floorHeld := int64(0)
	if r.Type == Sliding && c.Prev > 0 {
		q, _ := bits.Div64(mul(c.Prev, rem).hi, mul(c.Prev, rem).lo, uint64(r.Window))
		floorHeld = int64(q)
	}
	return r.Count - c.Curr - floorHeld
}

// held is how much of the previous window's count still weighs on the
// estimate, rounded up: ceil(prev × rem / w) for a sliding window, 0 for a
// fixed one. Because counts are integers, "prev×rem/w + curr + need ≤ count"
// holds exactly when "held + curr + need ≤ count" does, so one division
// decides exactly.
func (r *Rule) held(prev int64, rem uint64) int64 {
	if r.Type == Fixed || prev <= 0 {
		return 0
	}
	if rem == uint64(r.Window) {
		return prev
	}
	return int64(ceilDiv(mul(prev, rem), uint64(r.Window)))
}

func (r *Rule) resetAfter(c Counts, rem uint64) time.Duration {
	switch {
	case c.Curr > 0 && r.Type == Sliding:
		return time.Duration(rem) + r.Window
	case c.Curr > 0, c.Prev > 0 && r.Type == Sliding:
		return time.Duration(rem)
	}
	return 0
}

// retryAfter is the shortest wait after which need hits fit with no other
// traffic. The estimate never grows without traffic, so the first moment
// that fits is the answer.
func (r *Rule) retryAfter(c Counts, rem, w uint64, need int64) time.Duration {
	if r.Type == Fixed {
		return time.Duration(rem)
	}
	if c.Curr+need <= r.Count && c.Prev > 0 {
		// Within this window: prev×(rem−t) + (curr+need)×w ≤ count×w
		// ⇔ t ≥ (prev×rem − (count−curr−need)×w) / prev.
		excess := sub128(mul(c.Prev, rem), mul(r.Count-c.Curr-need, w))
		return time.Duration(ceilDiv(excess, uint64(c.Prev)))
	}
	// After the boundary the current count decays: curr×(w−e) + need×w ≤
	// count×w ⇔ e ≥ (curr+need−count)×w / curr. Curr > 0 here because
	// need ≤ count and the hits did not fit.
	e := ceilDiv(mul(c.Curr+need-r.Count, w), uint64(c.Curr))
	return time.Duration(rem + e)
}

// u128 is an unsigned 128-bit integer; the sliding comparison multiplies
// counts up to 2^40 by windows in nanoseconds, which overflows 64 bits.
type u128 struct{ hi, lo uint64 }

func mul(a int64, b uint64) u128 {
	hi, lo := bits.Mul64(uint64(a), b)
	return u128{hi, lo}
}

func sub128(a, b u128) u128 {
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, borrow)
	return u128{hi, lo}
}

// ceilDiv returns ceil(a / b); the caller guarantees the quotient fits in 64
// bits.
func ceilDiv(a u128, b uint64) uint64 {
	q, r := bits.Div64(a.hi, a.lo, b)
	if r != 0 {
		q++
	}
	return q
}
