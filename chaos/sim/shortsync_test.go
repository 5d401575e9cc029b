package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestAdaptiveShortSyncStaysUnder checks sync intervals only ten or twenty
// times the network latency, where two nodes often sync within a latency of
// each other and claim from the same unclaimed budget before either hears
// of the other: their claims must share it, not both take it.
func TestAdaptiveShortSyncStaysUnder(t *testing.T) {
	for _, sync := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond} {
		for _, n := range []int{2, 5} {
			for _, load := range []float64{1.1, 4} {
				for _, typ := range []window.Type{window.Fixed, window.Sliding} {
					name := fmt.Sprintf("sync=%v/n=%d/load=%v/%v", sync, n, load, typ)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						c := Defaults()
						c.Alloc, c.Nodes, c.Limit, c.Window, c.Sync, c.Type = window.Adaptive, n, 500, time.Second, sync, typ
						c.Arrivals, c.Rate, c.Duration = Poisson, load*500, 12*time.Second
						r, err := Run(c)
						if err != nil {
							t.Fatal(err)
						}
						if over := max(r.FirstWindowErrorPct, r.LaterWindowsErrorPct.Max); over > 1 {
							t.Errorf("a window at %+.1f%% (latency %v), want none over +1%%", over, c.Latency)
						}
					})
				}
			}
		}
	}
}
