package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestAdaptiveManyNodesNearTheLimit checks fleets where the limit is only a
// few requests per node per sync interval and demand runs just above it:
// there an ample margin for every node is more than the whole stock, and
// budget stranded in the claims of quiet nodes shows as refusals on busy
// ones. The fleet must admit about what one exact limiter would, without
// overshooting, on each of three sync-phase draws.
func TestAdaptiveManyNodesNearTheLimit(t *testing.T) {
	for _, n := range []int{5, 16} {
		for _, sync := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond} {
			for _, typ := range []window.Type{window.Fixed, window.Sliding} {
				for _, skew := range []float64{0, 0.7} {
					for seed := uint64(1); seed <= 3; seed++ {
						name := fmt.Sprintf("n=%d/sync=%v/%v/skew=%v/seed=%d", n, sync, typ, skew, seed)
						t.Run(name, func(t *testing.T) {
							c := Defaults()
							c.Alloc, c.Nodes, c.Limit, c.Window, c.Sync, c.Type = window.Adaptive, n, 500, time.Second, sync, typ
							c.Arrivals, c.Rate, c.Duration, c.Seed = Poisson, 550, 12*time.Second, seed
							c.Skewed, c.Skew = skew > 0, skew
							r, err := Run(c)
							if err != nil {
								t.Fatal(err)
							}
							one := c
							one.Nodes, one.Skewed, one.Skew = 1, false, 0
							ref, err := Run(one)
							if err != nil {
								t.Fatal(err)
							}
							under := r.LaterWindowsErrorPct.Median - ref.LaterWindowsErrorPct.Median
							t.Logf("median window %+.1f%% (one exact limiter %+.1f%%), most %+.1f%%", r.LaterWindowsErrorPct.Median, ref.LaterWindowsErrorPct.Median, max(r.FirstWindowErrorPct, r.LaterWindowsErrorPct.Max))
							if under < -6 {
								t.Errorf("median window %+.1f%% against %+.1f%% for one exact limiter: %.1f points under, want at most 6",
									r.LaterWindowsErrorPct.Median, ref.LaterWindowsErrorPct.Median, -under)
							}
							if over := max(r.FirstWindowErrorPct, r.LaterWindowsErrorPct.Max); over > 2 {
								t.Errorf("a window at %+.1f%%, want none over +2%%", over)
							}
						})
					}
				}
			}
		}
	}
}
