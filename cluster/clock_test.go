package cluster

import "time"

// clockOf is a test's clock in Unix nanoseconds as Config.Now takes it (nil,
// the wall clock, stays nil). Tests count in nanoseconds, as the counters do.
func clockOf(now func() int64) func() time.Time {
	if now == nil {
		return nil
	}
	return func() time.Time { return time.Unix(0, now()) }
}
