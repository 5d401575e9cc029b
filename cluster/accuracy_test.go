package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// Three nodes on loopback share one key; every whole window stays within the
// bound of the allocation policy, and once traffic stops the three views
// agree within two sync intervals.
func TestClusterAccuracyAndConvergence(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster for several seconds")
	}
	const (
		nodes = 3
		rate  = 200.0 // per node
		count = 300
	)
	interval := 100 * time.Millisecond
	// Each classic node spends the cached remainder alone: up to (N−1)×r×s
	// more. Adaptive claims keep the fleet at the count.
	classicBound := count + (nodes-1)*rate*interval.Seconds()
	tests := []struct {
		alloc window.Allocation
		typ   window.Type
		bound float64 // admitted per window
		floor float64 // and at least
	}{
		{window.Classic, window.Fixed, classicBound, count},
		{window.Classic, window.Sliding, classicBound, 0},
		{window.Adaptive, window.Fixed, count, count * 0.98},
		{window.Adaptive, window.Sliding, count, count * 0.98},
	}
	// Wall-clock pacing and scheduling on a shared machine add a little to
	// any bound; classic's grows with every sync round the scheduler delays
	// (under the race detector on 2 busy cores, by several percent).
	slack := map[window.Allocation]float64{window.Classic: 1.08, window.Adaptive: 1.03}
	for _, tt := range tests {
		t.Run(tt.alloc.String()+"/"+tt.typ.String(), func(t *testing.T) {
			rule := window.Rule{Name: "api", Count: count, Window: time.Second, Type: tt.typ,
				SyncInterval: interval, Allocation: tt.alloc}
			clock := alignedClock(rule.Window)
			cl := startCluster(t, nodes, []window.Rule{rule}, clock)
			// Traffic starts with a window, so every window measured is whole.
			first := window.Index(clock(), rule.Window) + 1
			waitFor(t, 2*rule.Window, "a window starts", func() bool { return window.Index(clock(), rule.Window) == first })

			adm := &admissions{per: map[int64]int64{}}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, nd := range cl {
				wg.Add(1)
				go func() {
					defer wg.Done()
					drive(ctx, nd, rule, "user:42", rate, adm)
				}()
			}
			waitFor(t, 10*time.Second, "four whole windows pass", func() bool {
				return window.Index(clock(), rule.Window) >= first+4
			})
			cancel()
			wg.Wait()
			stopped := time.Now()

			for idx := first; idx < first+4; idx++ {
				got := adm.per[idx]
				t.Logf("window %d: admitted %d (bound %.0f)", idx-first, got, tt.bound)
				if float64(got) > tt.bound*slack[tt.alloc] {
					t.Errorf("window %d admitted %d, over the %s bound %.0f (×%.2f)", idx-first, got, tt.alloc, tt.bound, slack[tt.alloc])
				}
				if float64(got) < tt.floor/slack[tt.alloc] {
					t.Errorf("window %d admitted %d, under %.0f (÷%.2f)", idx-first, got, tt.floor, slack[tt.alloc])
				}
			}

			waitFor(t, 5*time.Second, "the three views agree", func() bool {
				_, v0, _ := cl[0].View(rule.Name, "user:42")
				for _, nd := range cl[1:] {
					if _, v, _ := nd.View(rule.Name, "user:42"); v != v0 {
						return false
					}
				}
				return true
			})
			took := time.Since(stopped)
			t.Logf("views agreed %v after traffic stopped", took)
			if took > 2*interval {
				t.Errorf("views agreed %v after traffic stopped, want within 2 × sync_interval = %v", took, 2*interval)
			}
		})
	}
}
