package strict

import (
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/window"
)

// testLogger keeps test output quiet unless SLUICE_TEST_LOG is set.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// alignedClock returns a clock, shared by every node of a test, whose
// current window of length w starts now: tests then see whole windows
// without waiting for a boundary.
func alignedClock(w time.Duration) func() int64 {
	now := time.Now().UnixNano()
	offset := window.Start(window.Index(now, w)+1, w) - now
	return func() int64 { return time.Now().UnixNano() + offset }
}

// clockOf is a test's clock in Unix nanoseconds as cluster.Config.Now
// takes it (nil, the wall clock, stays nil). Tests count in nanoseconds, as
// the counters do.
func clockOf(now func() int64) func() time.Time {
	if now == nil {
		return nil
	}
	return func() time.Time { return time.Unix(0, now()) }
}

// fastGossip makes memberlist declare a silent member dead, and forget it,
// within about a second rather than tens of seconds.
func fastGossip(mc *memberlist.Config) {
	mc.ProbeInterval = 100 * time.Millisecond
	mc.ProbeTimeout = 50 * time.Millisecond
	mc.SuspicionMult = 2
	mc.GossipInterval = 50 * time.Millisecond
	mc.GossipToTheDeadTime = 300 * time.Millisecond
	mc.PushPullInterval = 500 * time.Millisecond
}

// stayDown is how long a scenario keeps a node down: the fault's length,
// not a wait for anything to happen.
func stayDown(d time.Duration) { <-time.After(d) }
