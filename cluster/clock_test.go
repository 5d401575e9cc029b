package cluster

import (
	"time"

	"github.com/sluicehq/sluice/window"
)

// clockOf is a test's clock in Unix nanoseconds as Config.Now takes it (nil,
// the wall clock, stays nil). Tests count in nanoseconds, as the counters do.
func clockOf(now func() int64) func() time.Time {
	if now == nil {
		return nil
	}
	return func() time.Time { return time.Unix(0, now()) }
}

// sharedClock returns a clock in Unix nanoseconds at wall speed whose
// windows of length align start at its zero, and which a test and its
// nodes all read.
func sharedClock(align time.Duration) func() int64 {
	start := time.Now()
	base := window.Start(window.Index(start.UnixNano(), align)+1, align)
	return func() int64 { return base + int64(time.Since(start)) }
}
