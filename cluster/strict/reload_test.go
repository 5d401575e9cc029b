package strict

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// A rule moved from batched to strict and back keeps the counts of its
// window: the fleet admits the count once in all, across both switches.
func TestReloadSwitchesModeKeepingCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	const count = 120
	batched := window.Rule{Name: "api", Count: count, Window: time.Hour, Type: window.Fixed,
		SyncInterval: 50 * time.Millisecond}
	strict := batched
	strict.SyncInterval = window.Strict
	other := window.Rule{Name: "other", Count: 5, Window: time.Second, SyncInterval: 100 * time.Millisecond}
	// Strict checks wait for the log however slow the machine: the counts
	// must be exact.
	cl := startStrictCluster(t, 3, []window.Rule{batched, other}, alignedClock(time.Hour), patientStrict)
	ctx := context.Background()

	var admitted atomic.Int64
	spend := func(n int) {
		var wg sync.WaitGroup
		for _, nd := range cl {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					d, err := nd.Allow(ctx, "api", "k", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}
	views := func(want int64) func() bool {
		return func() bool {
			for _, nd := range cl {
				if _, v, _ := nd.View("api", "k"); v.Curr != want {
					return false
				}
			}
			return true
		}
	}

	// Batched: 3 × 15 = 45 admitted, well within the count.
	spend(15)
	if got := admitted.Load(); got != 45 {
		t.Fatalf("batched phase admitted %d, want 45", got)
	}
	waitFor(t, patience, "every view holds the 45", views(45))

	// To strict: the log starts from the 45.
	for _, nd := range cl {
		if err := nd.Reload(ctx, []window.Rule{strict, other}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, patience, "the log takes the rule", func() bool {
		for _, nd := range cl {
			if g := nd.group(); g == nil || !g.isVoter() || !g.fsm.hasRules(map[string]window.Rule{"api": strict}) {
				return false
			}
		}
		return true
	})
	spend(40) // asks for 120 more; 75 are left
	if got := admitted.Load(); got != count {
		t.Fatalf("after the switch to strict the fleet admitted %d in all, want exactly %d", got, count)
	}

	// Back to batched: every node's table learns the log's 120.
	for _, nd := range cl {
		if err := nd.Reload(ctx, []window.Rule{batched, other}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, patience, "every view holds the log's counts", views(count))
	spend(20)
	if got := admitted.Load(); got > count+count/50 {
		t.Fatalf("after the switch back the fleet admitted %d in all, over the count %d", got, count)
	}
	// The rule the reloads left alone kept working throughout.
	if _, err := cl[0].Allow(ctx, "other", "k", 1); err != nil {
		t.Fatal(err)
	}
}
