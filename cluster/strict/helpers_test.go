package strict

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/window"
)

// testLogger keeps test output quiet unless SLUICE_TEST_LOG is set: it
// keeps the last tailLines lines, Raft's debug lines among them, and prints
// them only if the test fails, for a failure under load is often seen once.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tl := &tailLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last %d log lines of a node:\n%s", tailLines, tl.String())
		}
	})
	return slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// tailLines is how many lines a tailLog keeps.
const tailLines = 2000

// tailLog keeps the last tailLines writes, one log line each.
type tailLog struct {
	mu    sync.Mutex
	lines []string
	next  int
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) < tailLines {
		l.lines = append(l.lines, string(p))
	} else {
		l.lines[l.next] = string(p)
		l.next = (l.next + 1) % tailLines
	}
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[l.next:], "") + strings.Join(l.lines[:l.next], "")
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
