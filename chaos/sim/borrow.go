package sim

import (
	"cmp"
	"slices"
	"time"

	"github.com/sluicehq/sluice/counter"
)

// waiter is a check waiting for the answer to a question to its key's
// owner: the question's flight, when it first began waiting, and when it
// gives up. A check waits a borrow timeout in all, whatever answers wake it
// meanwhile, and the one that asks gets a whole timeout for its question.
type waiter struct {
	flight       uint64
	since, until int64
	asker        bool
	// reasked says it asked again already, its first answer having come
	// in the window after the one it asked about.
	reasked bool
}

// borrowing is one node's questions to the key's owner, as cluster.Node
// handles them: checks on the key wait for the question in flight, each up
// to the borrow timeout; a question unanswered in time marks the owner
// silent, and until anything arrives from it checks that would ask are
// decided at once, Late. A node decides Lost only once the owner has been
// silent for cluster.OwnerLostAfter borrow timeouts and gossip no longer
// holds it alive; the simulator's nodes never fail, so they never do.
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

// outcome is how a check whose answer from owner did not come is decided:
// Late, for every owner answers gossip.
func (b *borrowing) outcome(counter.Incarnation) counter.Outcome { return counter.Late }

// start records a question sent at moment at: a new flight.
func (b *borrowing) start(seq uint64, owner counter.Incarnation, at int64) {
	b.flights++
	b.flight, b.seq, b.asked, b.owner = b.flights, seq, at, owner
}

// wait queues a check that arrived at moment at, asking or not, on the
// flight in flight, and reports whether no waiter had its deadline yet (so
// that one must be scheduled).
func (b *borrowing) wait(at int64, asker bool) bool {
	return b.rewait(waiter{since: at, until: at + b.timeout}, at, asker)
}

// rewait queues w again, on the flight in flight, after an answer at
// moment at left it short: it keeps its deadline unless it asked, and
// reports whether that deadline is new to the queue (its give-up may be
// scheduled already: a second finds nothing left to give up).
func (b *borrowing) rewait(w waiter, at int64, asker bool) bool {
	w.flight, w.asker = b.flight, asker
	if asker {
		w.until = at + b.timeout
	}
	// The queue is kept in the order of deadlines (for equal ones, of
	// queueing), so that giving up takes its head.
	i, found := slices.BinarySearchFunc(b.waiting, w.until, func(q waiter, until int64) int {
		return cmp.Compare(q.until, until)
	})
	for i < len(b.waiting) && b.waiting[i].until == w.until {
		i++
	}
	b.waiting = slices.Insert(b.waiting, i, w)
	return !found
}

// giveUp takes off the queue the checks whose wait ends by moment at; an
// asker among them drops its flight and marks the owner silent.
func (b *borrowing) giveUp(at int64) []waiter {
	n := 0
	for n < len(b.waiting) && b.waiting[n].until <= at {
		n++
	}
	out := slices.Clone(b.waiting[:n])
	b.waiting = slices.Delete(b.waiting, 0, n)
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
// checks that waited on it, in the order they were queued, and clears the
// flight.
func (b *borrowing) answered(d *counter.Delta) []waiter {
	if b.flight == 0 || !answers(d, b.seq) {
		return nil
	}
	var woken []waiter
	b.waiting = slices.DeleteFunc(b.waiting, func(w waiter) bool {
		if w.flight != b.flight {
			return false
		}
		woken = append(woken, w)
		return true
	})
	b.flight = 0
	return woken
}
