package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestCrashKeepsSavedCounts admits part of a window on a lone node with a
// data dir, waits for the node to save, crashes it (no Close, so nothing is
// flushed on the way out) and starts it again on the same data dir: the
// window must not start over.
func TestCrashKeepsSavedCounts(t *testing.T) {
	rule := window.Rule{Name: "api", Count: 100, Window: time.Hour, Type: window.Fixed, SyncInterval: 200 * time.Millisecond}
	clock := alignedClock(rule.Window)
	dir := t.TempDir()
	start := func() *Node {
		nd, err := Start(context.Background(), Config{Name: "solo", Rules: []window.Rule{rule}, DataDir: dir,
			Now: clockOf(clock), Logger: testLogger(t), PersistInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		return nd
	}
	nd := start()
	for i := range 40 {
		if d, err := nd.Allow(context.Background(), rule.Name, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("check %d: %+v, %v", i, d, err)
		}
	}
	saves := nd.Metrics().Saves
	waitFor(t, patience, "a save after the admissions", func() bool { return nd.Metrics().Saves > saves })
	nd.Kill()

	again := start()
	defer again.Close()
	d, err := again.Allow(context.Background(), rule.Name, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 60 {
		t.Errorf("after a crash: remaining %d, want 60 (40 of 100 admitted before it)", d.Remaining)
	}
}
