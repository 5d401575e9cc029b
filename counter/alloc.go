package counter

import (
	"time"

	"github.com/sluicehq/sluice/window"
)

// policy is how a clustered node divides a rule's budget with its peers
// between syncs. decide runs for every request on a key that has peers;
// sync runs for every live key at each of this node's sync rounds. Both run
// with the key's shard locked.
type policy interface {
	decide(t *Table, s *slot, own, view window.Counts, at moment, hits int64) window.Decision
	// sync runs at this node's sync round; epoch stamps what it publishes.
	sync(t *Table, s *slot, now, idx int64, epoch uint64)
	// published returns the own counts peers are told of, by slot position,
	// and unpublished what will be added to the current window's at the
	// next sync.
	published(s *slot) [2]int64
	unpublished(s *slot) int64
	// announce returns the claim and need peers are told of with the
	// current window's entry.
	announce(s *slot) news
	// crossed runs when a peer's news of the key arrives that was made
	// without this node's latest: the two crossed on the way.
	crossed(t *Table, s *slot, now int64)
}

// news is what a node tells its peers of its allocation with its current
// window's entry.
type news struct {
	claim, need int64
	opening     int64
	opens       bool
}

func policyFor(a window.Allocation) policy {
	if a == window.Classic {
		return classic{}
	}
	return adaptive{}
}

// moment is a request's time, with its window and how far into it, worked
// out once per request.
type moment struct {
	now     int64
	idx     int64
	elapsed time.Duration
}

// allocState is a key's allocation bookkeeping on one node.
type allocState struct {
	// budget is how many hits this node may admit between two syncs:
	// classic's cached remaining count, adaptive's claim.
	budget int64
	// spent is how many it has admitted since the last sync.
	spent int64
	// pushed is what classic has published, by slot position: the hits
	// admitted between two syncs are pushed into the window current at the
	// second, as a gateway pushing to a windowed store key does.
	pushed [2]int64

	// syncs counts the syncs and resets that started spent afresh, so
	// that a refund knows whether spent still holds its hits.
	syncs uint32
	// What adaptive keeps from its last sync of the key.
	synced  bool          // the key has been synced since it appeared here
	syncAt  int64         // when
	syncWin int64         // in which window
	frozen  window.Counts // the view then, to measure what decay releases since
	left    int64         // the headroom of frozen then
	// ownAtSync is what this node had admitted in the sync's window then.
	ownAtSync int64
	share     float64 // this node's share of released budget
	// releaseRate is share × what the previous window's decay releases per
	// nanosecond, until the window ends.
	releaseRate float64
	need        int64 // demand per sync interval before that sync
	// announcedNeed is the need peers were last told of.
	announcedNeed int64
	// opening is what this node last told its peers it may spend in a
	// fresh fixed window before its first sync there, and openingBefore
	// what it told them before that, which a peer may not have replaced
	// yet; opens is whether it has told them at all.
	opening, openingBefore int64
	opens                  bool
	demand                 int64 // demand since demandAt
	// demandAt is when demand started counting: the last sync, or the first
	// request of a key not yet synced.
	demandAt int64
}

// reset starts afresh for a key that has already admitted own: what it
// admitted counts as published.
func (a *allocState) reset(count int64, own [2]int64) {
	*a = allocState{budget: count, pushed: own, syncs: a.syncs + 1}
}

// roll keeps the budget across a window boundary (classic caches one number
// per key, whatever window it was computed in) and ages what was pushed.
func (a *allocState) roll(shift int64) {
	if shift == 1 {
		a.pushed = [2]int64{a.pushed[1], 0}
	} else {
		a.pushed = [2]int64{}
	}
}
