package cluster

import (
	"context"
	"errors"
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

// TestKeyNotUTF8KeepsSaving: a check with a key that is not UTF-8 is
// refused with ErrKeyNotUTF8 and counted nowhere, so the node's saves,
// protobuf messages whose keys must be UTF-8, go on; one such key counted
// would fail every save until its windows ended.
func TestKeyNotUTF8KeepsSaving(t *testing.T) {
	rule := window.Rule{Name: "api", Count: 100, Window: time.Hour, Type: window.Fixed, SyncInterval: 200 * time.Millisecond}
	nd, err := Start(context.Background(), Config{Name: "solo", Rules: []window.Rule{rule}, DataDir: t.TempDir(),
		Now: clockOf(alignedClock(rule.Window)), Logger: testLogger(t), PersistInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	if _, err := nd.Allow(context.Background(), rule.Name, "user:\xff", 1); !errors.Is(err, ErrKeyNotUTF8) {
		t.Fatalf("Allow with a key that is not UTF-8 = %v, want ErrKeyNotUTF8", err)
	}
	if d, err := nd.Allow(context.Background(), rule.Name, "user:1", 1); err != nil || !d.Allowed {
		t.Fatalf("a valid check: %+v, %v", d, err)
	}
	saves := nd.Metrics().Saves
	waitFor(t, patience, "a save after the checks", func() bool { return nd.Metrics().Saves > saves })
}
