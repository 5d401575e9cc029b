package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestSmallCountFarFromItsOwner checks fleets where the count is under 20
// per node and the key's owner is tens of milliseconds away: asking for
// every hit would admit one per round trip per node, so a node is granted
// what arrives while its question is in flight. Every check is decided
// within the borrow timeout, no window goes over the count, and a fixed
// window admits about the whole count.
func TestSmallCountFarFromItsOwner(t *testing.T) {
	for _, tc := range []struct {
		nodes   int
		latency time.Duration
		typ     window.Type
		under   float64 // most a median window may fall short, in %
	}{
		{32, 50 * time.Millisecond, window.Fixed, 2},
		{32, 100 * time.Millisecond, window.Fixed, 2},
		{64, 100 * time.Millisecond, window.Fixed, 2},
		// Sliding windows at this many nodes fall short of the count by
		// more, for the reason BENCHMARKS.md gives; the bound keeps them
		// from falling back to one hit per round trip (−70 %).
		{32, 100 * time.Millisecond, window.Sliding, 10},
	} {
		t.Run(fmt.Sprintf("n=%d/%v/%v", tc.nodes, tc.latency, tc.typ), func(t *testing.T) {
			c := Defaults()
			c.Nodes, c.Latency, c.Type, c.Limit, c.Rate, c.Duration = tc.nodes, tc.latency, tc.typ, 500, 800, 10*time.Second
			r, err := Run(c)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("median window %+.1f%%, fullest %d, %d of %d checks decided",
				r.LaterWindowsErrorPct.Median, r.MaxWindowAdmitted, r.DemandTotal, int64(c.Rate*c.Duration.Seconds()))
			if r.MaxWindowAdmitted > c.Limit {
				t.Errorf("a window admitted %d, over the count of %d", r.MaxWindowAdmitted, c.Limit)
			}
			if r.LaterWindowsErrorPct.Median < -tc.under {
				t.Errorf("median window %+.1f%%, want within −%v%%", r.LaterWindowsErrorPct.Median, tc.under)
			}
			// A check waits a borrow timeout at most, twice if it asks: all
			// but the last moments' are decided by the end.
			if arrived := int64(c.Rate * c.Duration.Seconds()); r.DemandTotal < arrived*99/100 {
				t.Errorf("%d of %d checks decided, want all but the run's last moments", r.DemandTotal, arrived)
			}
		})
	}
}
