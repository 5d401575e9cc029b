package sim

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/counter"
)

// waiter is a check waiting for the answer to a question to its key's
// owner: the question's flight, and when it began waiting on it (it gives
// up a borrow timeout later).
type waiter struct {
	flight uint64
	since  int64
	asker  bool
}

// borrowing is one node's questions to the key's owner, as cluster.Node
// handles them: checks on the key wait for the question in flight, each up
// to the borrow timeout; a question unanswered in time marks the owner
// silent, and until anything arrives from it checks that would ask are
// decided at once, Late, or Lost once it has been silent for
// cluster.OwnerLostAfter borrow timeouts.
//
// Waiters are kept in the order of their deadlines, which is the order
// they began waiting in: when an answer wakes a flight's waiters, those
// that must wait again begin waiting anew, together, behind the rest.
type borrowing struct {
	timeout int64
	// flight numbers the question in flight (0 for none); seq is its
	// delta's sequence, which its answer echoes.
	flight, flights uint64
	seq             uint64
	asked           int64
	owner           counter.Incarnation
	waiting         []waiter
	silent          map[counter.Incarnation]int64
}

func newBorrowing(timeout time.Duration) *borrowing {
	return &borrowing{timeout: int64(timeout), silent: map[counter.Incarnation]int64{}}
}

// outcome is how a check that began waiting at moment asked for an answer
// from owner that did not come is decided at moment now.
func (b *borrowing) outcome(owner counter.Incarnation, asked, now int64) counter.Outcome {
	since, ok := b.silent[owner]
	if !ok {
		since = asked
	}
	if now-since >= cluster.OwnerLostAfter*b.timeout {
		return counter.Lost
	}
	return counter.Late
}

// start records a question sent at moment at: a new flight.
func (b *borrowing) start(seq uint64, owner counter.Incarnation, at int64) {
	b.flights++
	b.flight, b.seq, b.asked, b.owner = b.flights, seq, at, owner
}

// wait queues a check on the flight in flight from moment at, and reports
// whether no waiter had that deadline yet (so that one must be scheduled).
func (b *borrowing) wait(at int64, asker bool) bool {
	fresh := len(b.waiting) == 0 || b.waiting[len(b.waiting)-1].since != at
	b.waiting = append(b.waiting, waiter{flight: b.flight, since: at, asker: asker})
	return fresh
}

// giveUp takes off the queue the checks whose wait ends by moment at; an
// asker among them drops its flight and marks the owner silent.
func (b *borrowing) giveUp(at int64) []waiter {
	n := 0
	for n < len(b.waiting) && b.waiting[n].since+b.timeout <= at {
		n++
	}
	out := b.waiting[:n:n]
	b.waiting = b.waiting[n:]
	for _, w := range out {
		if w.asker && w.flight == b.flight {
			if _, silent := b.silent[b.owner]; !silent {
				b.silent[b.owner] = b.asked
			}
			b.flight = 0
		}
	}
	return out
}

// heard records that a delta arrived from peer.
func (b *borrowing) heard(peer counter.Incarnation) { delete(b.silent, peer) }

// answered takes off the queue, when d answers the flight in flight, the
// checks that waited on it, in the order they began waiting, and clears
// the flight.
func (b *borrowing) answered(d *counter.Delta) []waiter {
	if b.flight == 0 || !answers(d, b.seq) {
		return nil
	}
	i := len(b.waiting)
	for i > 0 && b.waiting[i-1].flight == b.flight {
		i--
	}
	woken := slices.Clone(b.waiting[i:])
	b.waiting, b.flight = b.waiting[:i], 0
	return woken
}
