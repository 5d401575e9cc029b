package counter

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestOwnedRefusalWaitsForTheGrantLine checks the wait a node gives a
// refused check of a saturated sliding key whose owner shares the decay as
// a grant that grows with time: the retry is admitted only once the view
// has room and the grant has grown to the hits, so the wait is the later
// of the two. Here the grant lags the view's room by 4 ms, as when the
// owner started the line at the moment it received the question.
func TestOwnedRefusalWaitsForTheGrantLine(t *testing.T) {
	r := ownedRule(10, time.Minute, window.Sliding)
	f := newOwnedFleet(t, 3, r)
	own := f.ownerIndex("dave")
	i := (own + 1) % 3
	rp := f.nodes[i]
	w := int64(r.Window)
	start := (t0/w + 1) * w // a window's start
	at := func(elapsed time.Duration) int64 { return start + int64(elapsed) }
	if d := f.allow(i, at(time.Second), "dave", 0); !d.Allowed {
		t.Fatalf("a check of no hits: %+v", d)
	}
	// The fleet admitted 10 in the window before and 2 in this one, none
	// of them here: the view has room for one at 18 s. The owner's line
	// gives this node one hit at 18.004 s.
	lag := 4 * time.Millisecond
	tab := rp.Table("api")
	sh, h := tab.shardOf("dave")
	sh.mu.Lock()
	s := sh.lookup("dave", h)
	if s == nil || s.owned() == nil {
		sh.mu.Unlock()
		t.Fatal("node holds no lease of the key")
	}
	o := s.owned()
	o.others = [2]int64{10, 2}
	o.setGrant(line{base: 0, rate: 10, from: at(12*time.Second + lag)}, 0)
	sh.mu.Unlock()

	for _, tc := range []struct {
		at      time.Duration
		allowed bool
		wait    time.Duration
	}{
		{15 * time.Second, false, 3*time.Second + lag}, // the view is full: the line is later
		{18 * time.Second, false, lag},                 // the view has room, the line not yet
		{18*time.Second + lag, true, 0},
	} {
		d, ask, err := rp.Decide(at(tc.at), "api", "dave", 1, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ask != nil {
			t.Fatalf("at %v: asked the owner, want a decision from the line", tc.at)
		}
		if d.Allowed != tc.allowed || !d.Allowed && d.RetryAfter != tc.wait {
			t.Fatalf("at %v: %+v, want allowed=%v, retry after %v", tc.at, d, tc.allowed, tc.wait)
		}
	}
}
