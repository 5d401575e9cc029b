package counter

import (
	"time"

	"github.com/sluicehq/sluice/window"
)

// classic is the gateway of the published measurements, which counts in a
// shared store and syncs with it every sync interval. At each sync a node
// pushes what it admitted since the last one into the window current at that
// moment, then caches the global remaining count (count minus the estimate
// of the store at that moment) and, until the next sync, admits while what
// it has admitted since stays below that one number.
//
// Every node believes the whole remainder is its own, hence the
// (N−1) × rate × sync overshoot of fixed windows. In sliding windows the
// decay released between syncs waits for the next sync, and hits pushed
// late land in the newer window, where they weigh more: both under-admit.
type classic struct{}

func (classic) decide(t *Table, s *slot, own, view window.Counts, at moment, hits int64) window.Decision {
	a := &s.x.alloc
	need := max(hits, 1)
	now := at.now
	d := t.rule.DecideAt(view, at.elapsed, 0)
	d.Allowed = a.budget-a.spent >= need
	if d.Allowed && hits > 0 {
		a.spent += hits
	}
	d.Remaining = max(a.budget-a.spent, 0)
	d.RetryAfter = 0
	if !d.Allowed {
		d.RetryAfter = untilSync(t, now)
	}
	return d
}

func (classic) sync(t *Table, s *slot, now, idx int64, epoch uint64) {
	a := &s.x.alloc
	if a.spent > 0 {
		a.pushed[1] += a.spent
		s.ver[1] = stampOf(epoch)
	}
	store := window.Counts{Prev: a.pushed[0] + s.x.peerAdm[0], Curr: a.pushed[1] + s.x.peerAdm[1]}
	a.budget, a.spent = t.rule.Headroom(store, now), 0
	a.syncs++
}

func (classic) published(s *slot) [2]int64 { return s.x.alloc.pushed }

func (classic) unpublished(s *slot) int64 { return s.x.alloc.spent }

func (classic) announce(*slot) news { return news{} }

func (classic) crossed(*Table, *slot, int64) {}

// untilSync is how long until the next sync round refreshes budgets.
func untilSync(t *Table, now int64) time.Duration {
	return time.Duration(max(t.nextSync.Load()-now, 0))
}
