package counter

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestReportNeed checks what a node says it needs of a key: at a small
// count, only what arrives during a round trip while it can ask its owner
// in time, so that it asks for the rest as one exact limiter would hand it
// out; a sync interval of demand and the round trip at a larger count, or
// where its owner is too far to ask in time.
func TestReportNeed(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name       string
		count      int64
		live       int32
		askTimeout time.Duration
		demand     int64 // per sync interval of 200 ms
		rtt        int64
		want       int64
	}{
		{"no demand", 500, 32, 250 * time.Millisecond, 0, 200 * ms, 0},
		{"small count, near owner", 500, 32, 250 * time.Millisecond, 5, 2 * ms, 0},
		{"small count, round trip unknown", 500, 32, 250 * time.Millisecond, 5, 0, 0},
		{"small count, far owner", 500, 32, 250 * time.Millisecond, 5, 200 * ms, 5},
		{"small count, half an interval away", 500, 32, 250 * time.Millisecond, 5, 100 * ms, 2},
		{"small count, owner beyond the ask timeout", 500, 32, 250 * time.Millisecond, 5, 300 * ms, 13},
		{"small count, no ask timeout", 500, 32, 0, 5, 300 * ms, 7},
		{"large count, near owner", 500, 16, 250 * time.Millisecond, 5, 2 * ms, 6},
		{"large count, round trip unknown", 500, 16, 250 * time.Millisecond, 5, 0, 5},
		{"large count, far owner", 500, 16, 250 * time.Millisecond, 5, 200 * ms, 10},
		{"round trip capped at 8 intervals", 500, 16, 0, 5, 10_000 * ms, 45},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := window.Rule{Name: "r", Count: tc.count, Window: time.Second, Type: window.Fixed,
				SyncInterval: 200 * time.Millisecond, Allocation: window.Owner}
			tb := newTable(rule, newRegistry(), newRoundTrips(tc.askTimeout), 1, nil)
			tb.live.Store(tc.live)
			if got := tb.reportNeed(tc.demand, tc.rtt); got != tc.want {
				t.Errorf("need for %d hits per interval, round trip %v: %d, want %d",
					tc.demand, time.Duration(tc.rtt), got, tc.want)
			}
		})
	}
}
