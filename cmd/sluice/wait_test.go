package main

import (
	"testing"
	"time"
)

// patience bounds what a test waits for. Nothing a test waits on takes
// more than a few seconds on an idle machine; the bound only turns a hang
// into a failure, so it is far past what the race detector and other
// packages' tests on two busy cores make of those seconds.
const patience = time.Minute

// waitUntil polls cond until it holds, or fails the test once within has
// passed; cond also returns what it saw, for the failure message.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s; last saw:\n%s", within, what, saw)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
}
