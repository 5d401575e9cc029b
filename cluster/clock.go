package cluster

import (
	"sync/atomic"
	"time"
)

// wallClock reads Unix nanoseconds from the monotonic clock anchored to the
// wall clock. One monotonic read costs half of time.Now, which reads both,
// and admission reads the clock on every check. The anchor is refreshed from
// the wall clock by the node's tick loop, so the node follows NTP steps a
// round later and is immune to them in between.
type wallClock struct {
	base   time.Time
	offset atomic.Int64
}

func newWallClock() *wallClock {
	c := &wallClock{base: time.Now()}
	c.offset.Store(c.base.UnixNano())
	return c
}

// Now returns the current time in Unix nanoseconds.
func (c *wallClock) Now() int64 { return c.offset.Load() + int64(time.Since(c.base)) }

// reanchor moves the anchor to the wall clock when they have drifted apart
// by more than a millisecond.
func (c *wallClock) reanchor() {
	since := time.Since(c.base)
	wall := time.Now().UnixNano()
	if d := wall - (c.offset.Load() + int64(since)); d > int64(time.Millisecond) || d < -int64(time.Millisecond) {
		c.offset.Store(wall - int64(since))
	}
}
