package cluster

import (
	"time"

	"github.com/sluicehq/sluice/window"
)

// Decision is a node's answer to one check.
type Decision struct {
	// Allowed reports whether the hits were admitted (for 0 hits: whether
	// one hit would be).
	Allowed bool
	// Limit is the rule's count.
	Limit int64
	// Remaining is how many more hits would be admitted now, after these.
	// With owner allocation it is what the whole fleet has left, as this
	// node last heard from the key's owner, less its own checks since;
	// when the owner did not answer in time, what this node may still
	// admit on its own.
	Remaining int64
	// ResetAfter is how long until the whole Limit is available again if
	// no more hits arrive.
	ResetAfter time.Duration
	// RetryAfter is, for a refusal, how long until the same hits would be
	// admitted if no other hits arrive (rounded up to the nanosecond, so a
	// retry at exactly RetryAt is admitted); zero when Allowed.
	RetryAfter time.Duration
	// Path says what produced the decision: this node's view, the strict
	// log, or a strict rule's fail mode.
	Path window.Path
	// Shadowed says the rule is in shadow mode (window.Rule.Shadow) and
	// refused the hits: the caller is admitted all the same, nothing was
	// spent, and RetryAfter is the wait the refusal would have given.
	Shadowed bool

	// at is when the decision was made, in Unix nanoseconds; 0 when
	// unknown. The core counts in integers, and a time.Time is made only
	// when asked for.
	at int64
}

// At returns when the decision was made, on the clock that made it: the
// deciding node's, or for a strict decision the leader's, which every
// replica of the log shares. It is the zero Time when unknown.
func (d Decision) At() time.Time {
	if d.at == 0 {
		return time.Time{}
	}
	return time.Unix(0, d.at)
}

// RetryAt returns when the same hits would be admitted if no other hits
// arrive: At plus RetryAfter, which is At itself for an admission. It is
// the zero Time when At is unknown.
func (d Decision) RetryAt() time.Time {
	if d.at == 0 {
		return time.Time{}
	}
	return time.Unix(0, d.at+int64(d.RetryAfter))
}

// from sets d to the API's form of a decision of the core.
func (d *Decision) from(c *window.Decision) {
	d.Allowed = c.Allowed
	d.Limit = c.Limit
	d.Remaining = c.Remaining
	d.ResetAfter = c.ResetAfter
	d.RetryAfter = c.RetryAfter
	d.Path = c.Path
	d.Shadowed = false
	d.at = c.At
}
