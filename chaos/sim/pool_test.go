package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestSaturatedSlidingNearTheOwner checks saturated sliding windows on
// fleets whose nodes are a round trip of a few milliseconds from their
// owner, with counts large enough per node to be handed out as lines. A
// line's holder can spend its last hits only at its next check, which may
// come after the window ends, so lines cost about one gap between a node's
// checks per node per window (16 nodes at 50 checks/s each: −2.8 %). Nodes
// that ask faster than their checks arrive ask for the window's last sync
// interval instead, as checks at one exact limiter take the last room.
func TestSaturatedSlidingNearTheOwner(t *testing.T) {
	for _, tc := range []struct {
		nodes   int
		latency time.Duration
		rate    float64
	}{
		{4, time.Millisecond, 800},
		{8, time.Millisecond, 800},
		{16, time.Millisecond, 800},
		{16, 5 * time.Millisecond, 800},
		{8, time.Millisecond, 2000},
		{8, 2 * time.Millisecond, 600},
	} {
		t.Run(fmt.Sprintf("n=%d/%v/%v", tc.nodes, tc.latency, tc.rate), func(t *testing.T) {
			c := Defaults()
			c.Nodes, c.Latency, c.Type, c.Limit, c.Rate, c.Duration = tc.nodes, tc.latency, window.Sliding, 500, tc.rate, 10*time.Second
			r, err := Run(c)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("median window %+.1f%%, fullest %d", r.LaterWindowsErrorPct.Median, r.MaxWindowAdmitted)
			if r.MaxWindowAdmitted > c.Limit {
				t.Errorf("a window admitted %d, over the count of %d", r.MaxWindowAdmitted, c.Limit)
			}
			if r.LaterWindowsErrorPct.Median < -1 {
				t.Errorf("median window %+.1f%%, want within −1%%", r.LaterWindowsErrorPct.Median)
			}
		})
	}
}

// TestSteadyDemandUnderTheLimitSliding checks steady demand just under the
// count of a sliding window, where what the previous window's decay
// releases is what the nodes ask for: nodes that ask faster than their
// checks arrive take their part of it as lines, and the rest of the room
// stays with the owner for its own checks and for questions instead of
// sitting unspent in grants (10 % of demand was refused here when lines
// also took shares of the room).
func TestSteadyDemandUnderTheLimitSliding(t *testing.T) {
	for _, tc := range []struct {
		nodes       int
		limit       int64
		rate        float64
		sync        time.Duration
		windowCount int
	}{
		{2, 50, 45, 200 * time.Millisecond, 60},
		{3, 100, 90, 200 * time.Millisecond, 60},
		{2, 500, 450, 100 * time.Millisecond, 30},
	} {
		t.Run(fmt.Sprintf("n=%d/%d/%v", tc.nodes, tc.limit, tc.rate), func(t *testing.T) {
			c := Defaults()
			c.Nodes, c.Type, c.Limit, c.Rate, c.Sync = tc.nodes, window.Sliding, tc.limit, tc.rate, tc.sync
			c.Duration = time.Duration(tc.windowCount) * c.Window
			r, err := Run(c)
			if err != nil {
				t.Fatal(err)
			}
			refused := float64(r.RefusedTotal) / float64(r.DemandTotal) * 100
			t.Logf("%d of %d admitted, %.1f%% refused, fullest window %d", r.AdmittedTotal, r.DemandTotal, refused, r.MaxWindowAdmitted)
			if r.MaxWindowAdmitted > c.Limit {
				t.Errorf("a window admitted %d, over the count of %d", r.MaxWindowAdmitted, c.Limit)
			}
			if refused > 2 {
				t.Errorf("%.1f%% of demand under the limit refused, want at most 2%%", refused)
			}
		})
	}
}
