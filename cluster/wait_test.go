package cluster

import (
	"testing"
	"time"
)

// patience bounds what a test waits for. Nothing a test waits on takes
// more than a few seconds on an idle machine; the bound only turns a hang
// into a failure, so it is far past what the race detector and other
// packages' tests on two busy cores make of those seconds.
const patience = time.Minute

// waitFor polls cond until it holds, or fails the test once within has
// passed. It is for conditions nothing signals (metrics, views, the clock).
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // the poll interval
	}
}

// freshBootstrapWait is the StrictBootstrapWait of fleets tests start
// together: none of their members can have forgotten a strict group.
const freshBootstrapWait = 100 * time.Millisecond
