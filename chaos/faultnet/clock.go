package faultnet

import (
	"sync"
	"sync/atomic"
	"time"
)

// clocks are the nodes' clocks: one monotonic reading of the wall clock,
// shared, plus an offset every node shares and a skew of each node's own.
// Reading the monotonic clock keeps every node's time and the test's in one
// order, so a decision's time compares exactly with when it was asked.
type clocks struct {
	base      time.Time
	baseNanos int64
	offset    atomic.Int64

	mu    sync.Mutex
	skews map[string]*atomic.Int64
}

// newClocks starts the switchboard's time within the first second of an
// hour, keeping the wall clock's phase within the second: a scenario shorter
// than an hour then never sees an hour's window roll over, as one that
// started at 59:59 would, while windows of a second or less fall where they
// would.
func newClocks() clocks {
	now := time.Now()
	ns := now.UnixNano()
	start := ns - ns%int64(time.Hour) + ns%int64(time.Second)
	return clocks{base: now, baseNanos: start, skews: map[string]*atomic.Int64{}}
}

func (c *clocks) skew(node string) *atomic.Int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.skews[node]
	if s == nil {
		s = new(atomic.Int64)
		c.skews[node] = s
	}
	return s
}

// Now returns the true time of the switchboard in Unix nanoseconds: the
// clock of a node without skew.
func (sb *Switchboard) Now() int64 {
	return sb.clocks.baseNanos + int64(time.Since(sb.clocks.base)) + sb.clocks.offset.Load()
}

// Clock returns the named node's clock for cluster.Config.Now: the
// switchboard's time plus the node's skew, read at every call, so a skew set
// later takes effect at once.
func (sb *Switchboard) Clock(node string) func() time.Time {
	skew := sb.clocks.skew(node)
	return func() time.Time { return time.Unix(0, sb.Now()+skew.Load()) }
}

// SkewClock sets the named node's clock to run d ahead of the switchboard's
// time (behind, for a negative d).
func (sb *Switchboard) SkewClock(node string, d time.Duration) {
	sb.clocks.skew(node).Store(int64(d))
}

// AlignNext moves every clock forward, by less than w, so that a boundary
// of windows of length w falls lead from now, and returns that boundary in
// the switchboard's time. A test then starts on a whole window without
// waiting for one. Call it before the nodes count anything: a jump moves
// every window they hold.
func (sb *Switchboard) AlignNext(w, lead time.Duration) int64 {
	at := sb.Now() + int64(lead)
	boundary := at - at%int64(w)
	if boundary < at {
		boundary += int64(w)
	}
	sb.clocks.offset.Add(boundary - at)
	return boundary
}
