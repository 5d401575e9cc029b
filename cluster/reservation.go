package cluster

import (
	"sync/atomic"

	"github.com/sluicehq/sluice/counter"
)

// Reservation is hits a Limiter's Reserve checked, admitted or not; an
// admitted one can be cancelled to give its hits back. It is safe for
// concurrent use.
type Reservation struct {
	n      *Node
	d      Decision
	ticket counter.Ticket   // where the hits were counted; empty for a strict rule
	parts  []counter.Ticket // instead, for a rule with several limits: one per limit
	done   atomic.Bool      // cancelled already
}

// OK reports whether the hits were admitted.
func (r *Reservation) OK() bool { return r.d.Allowed }

// Decision returns the decision the reservation was made by.
func (r *Reservation) Decision() Decision { return r.d }

// Cancel gives the reservation's hits back, where the window still holds
// them: until the window they were counted in ends, or on a node alone, for
// a sliding window, until the window after it ends (its estimate still
// weighs them; in a fleet, what their decay releases there has been shared
// out already). It reports whether it gave them back; it does nothing and
// reports false for a refused reservation, one already cancelled, one made
// for 0 hits, once its window no longer holds the hits, once a Reload
// changed the rule's window or removed it, and once the node is closing.
//
// For a strict rule Cancel is a no-op that reports false: its hits are
// counted in the Raft log, which takes no refunds.
//
// The hits go back into this node's count at once, so that it admits them
// again. Its peers count it by the most it reported for the window, and
// see them given back only once it admits past that: a cancelled hit
// never lets the fleet admit more than the count.
func (r *Reservation) Cancel() bool {
	if !r.d.Allowed || r.n.isClosing.Load() || !r.done.CompareAndSwap(false, true) {
		return false
	}
	// Read only by the one call that got past the swap: Refund empties it.
	given := int64(0)
	for i := range r.parts {
		if r.parts[i].Counted() {
			given += r.n.replica.Refund(&r.parts[i], r.n.now())
		}
	}
	if r.ticket.Counted() {
		given += r.n.replica.Refund(&r.ticket, r.n.now())
	}
	if given == 0 {
		return false
	}
	if !r.n.changed.Load() {
		r.n.changed.Store(true)
	}
	return true
}
