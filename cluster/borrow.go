package cluster

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// DefaultBorrowTimeout is how long a check waits for the answer of a key's
// owner when Config.BorrowTimeout is zero.
const DefaultBorrowTimeout = 250 * time.Millisecond

// ruleKey names one key of one rule.
type ruleKey struct{ rule, key string }

// borrows are the questions this node has sent keys' owners and not yet
// had answered: checks on the same key wait for the one in flight rather
// than each asking.
type borrows struct {
	mu      sync.Mutex
	pending map[ruleKey]*flight
	// queued is, per key, the hits of the checks waiting for its owner's
	// answer: a question asks for room for them all. anyQueued is their
	// total, read without the lock on every check.
	queued    map[ruleKey]int64
	anyQueued atomic.Int64
	// silent are the owners a question to which went unanswered, with the
	// moment it was asked: checks that would ask one are decided at once,
	// without waiting, until anything arrives from it again or it leaves.
	silent map[counter.Incarnation]int64
}

// silentSince reports whether owner left a question unanswered and has sent
// nothing since, and since when.
func (b *borrows) silentSince(owner counter.Incarnation) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.silent[owner]
	return at, ok
}

// markSilent records that a question asked of owner at moment at went
// unanswered, unless it was already silent.
func (b *borrows) markSilent(owner counter.Incarnation, at int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.silent == nil {
		b.silent = make(map[counter.Incarnation]int64)
	}
	if _, ok := b.silent[owner]; !ok {
		b.silent[owner] = at
	}
}

// OwnerLostAfter is how many borrow timeouts an owner may stay silent
// before checks on its keys may be decided from this node's view (within
// its share) rather than refused beyond the grant held.
const OwnerLostAfter = 4

// outcomeFor says how a check is decided whose question to owner, asked
// at moment asked, went unanswered, and the moment from which such checks
// may be decided from this node's view instead: once the owner has been
// silent that long and gossip no longer holds it alive. An owner that
// answers gossip's probes is alive and may still be admitting, and the
// room this node's view shows is its to give: a lossy link stalls the
// sync stream for a second or more while the owner goes on, and a node
// that decided from its view then would admit on top of it (3 nodes, 20 %
// loss: +64 % in a window). Such checks are refused beyond the grant
// until answers flow again or gossip suspects the owner.
func (n *Node) outcomeFor(owner counter.Incarnation, asked int64) (counter.Outcome, int64) {
	since, ok := n.borrows.silentSince(owner)
	if !ok {
		since = asked
	}
	lostAt := since + OwnerLostAfter*int64(n.cfg.BorrowTimeout)
	if n.now() >= lostAt && !n.gossipAlive(owner.Node) {
		return counter.Lost, lostAt
	}
	return counter.Late, lostAt
}

// gossipAlive reports whether gossip holds member name alive; a node
// without gossip has no members.
func (n *Node) gossipAlive(name string) bool {
	return n.members != nil && n.members.gossipAlive(name)
}

// settleUnanswered decides a check whose question to owner, asked at
// moment asked, went unanswered. A refusal while the owner may only be
// late tells the client to come back once this node decides without it,
// not after a sync interval, when it would still wait on the same owner
// and refuse again.
func (n *Node) settleUnanswered(now int64, rk ruleKey, hits int64, owner counter.Incarnation, asked int64, tk *counter.Ticket) (window.Decision, error) {
	outcome, lostAt := n.outcomeFor(owner, asked)
	d, err := n.replica.Settle(now, rk.rule, rk.key, hits, outcome, tk)
	if err == nil && outcome == counter.Late && !d.Allowed && d.RetryAfter > 0 {
		d.RetryAfter = max(d.RetryAfter, time.Duration(lostAt-now))
	}
	return d, err
}

// heardFrom records that something arrived from peer, or that it left.
func (b *borrows) heardFrom(peer counter.Incarnation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.silent, peer)
}

// flight is one question in flight: its report's sequence, the moment
// after which it is no longer waited on, and a channel closed when the
// answer has been merged.
type flight struct {
	seq   uint64
	until int64
	done  chan struct{}
}

// start records a question with sequence seq for rk, asked at moment now
// and waited on for timeout, unless one is already in flight and still
// waited on, which it returns instead. A question whose asker stopped
// waiting early (its context ended) stays in flight for others to wait on
// until its time is up.
func (b *borrows) start(rk ruleKey, seq uint64, now int64, timeout time.Duration) (f *flight, mine bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := b.pending[rk]; f != nil && now < f.until {
		return f, false
	}
	if b.pending == nil {
		b.pending = make(map[ruleKey]*flight)
	}
	f = &flight{seq: seq, until: now + int64(timeout), done: make(chan struct{})}
	b.pending[rk] = f
	return f, true
}

// numbered sets the sequence of f's question, once it is known: until
// then no answer is taken for f's.
func (b *borrows) numbered(f *flight, seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f.seq = seq
}

// enqueue counts hits more waiting on rk's owner.
func (b *borrows) enqueue(rk ruleKey, hits int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queued == nil {
		b.queued = make(map[ruleKey]int64)
	}
	b.queued[rk] += hits
	b.anyQueued.Add(hits)
}

// dequeue counts hits no longer waiting on rk's owner.
func (b *borrows) dequeue(rk ruleKey, hits int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queued[rk] -= hits; b.queued[rk] <= 0 {
		delete(b.queued, rk)
	}
	b.anyQueued.Add(-hits)
}

// waitingBesides is how many hits wait on rk's owner besides mine (those
// of a check already counted waiting, 0 for one not yet).
func (b *borrows) waitingBesides(rk ruleKey, mine int64) int64 {
	if b.anyQueued.Load() <= mine {
		// Nothing else waits anywhere: the common case, decided without
		// the lock every check would otherwise contend for.
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.queued[rk]-mine, 0)
}

// answered releases the checks waiting on the questions d answers.
func (b *borrows) answered(d *counter.Delta) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return
	}
	for _, rd := range d.Rules {
		for _, e := range rd.Entries {
			rk := ruleKey{rd.Rule, e.Key}
			if f := b.pending[rk]; f != nil && e.Told >= f.seq {
				close(f.done)
				delete(b.pending, rk)
			}
		}
	}
}

// drop forgets f if it is still the question in flight for rk.
func (b *borrows) drop(rk ruleKey, f *flight) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[rk] == f {
		delete(b.pending, rk)
	}
}

// allowBatched decides a check of a batched rule at moment now, own on the
// node's own clock. Where the key's owner must be asked, the check waits
// for its answer, up to BorrowTimeout in all and the caller's context; a
// check whose answer does not come in time is decided from this node's
// view. A non-nil tk is set to where admitted hits were counted; a check
// without one is counted in the rule's table (counter.Tally). Every check
// that waits on an owner is timed, a part of a larger check too; of the
// others, about one in 64 with sample set (sampledCheck).
func (n *Node) allowBatched(ctx context.Context, rule, key string, hits int64, tk *counter.Ticket, own, now int64, sample bool) (window.Decision, error) {
	rk := ruleKey{rule, key}
	d, ask, err := n.replica.Decide(now, rule, key, hits, n.borrows.waitingBesides(rk, 0), tk)
	if err != nil || ask == nil {
		if sample && sampledCheck(own) && err == nil {
			n.latency[window.PathLocal].Observe(n.ownNow() - own)
		}
		return d, err
	}
	d, err = n.awaitOwner(ctx, rk, hits, ask, tk)
	n.latency[latencyBorrow].Observe(n.ownNow() - own)
	return d, err
}

// sampledCheck reports whether a local check that started at own (this
// node's clock, Unix nanoseconds) is one of those timed: about one in 64,
// chosen by the top bits of a multiplicative hash of its start, which is
// spread evenly over the checks whatever their rate, and costs a check a
// multiply, not a counter shared by every core. A clock that does not move
// (a test's) times all of its checks or none.
func sampledCheck(own int64) bool { return uint64(own)*0x9e3779b97f4a7c15>>58 == 0 }

// awaitOwner decides a check that must ask the key's owner, ask being the
// question Decide built for it; a non-nil tk is set to where admitted hits
// were counted.
func (n *Node) awaitOwner(ctx context.Context, rk ruleKey, hits int64, ask *counter.Outbound, tk *counter.Ticket) (window.Decision, error) {
	rule, key := rk.rule, rk.key
	// One timer for the whole wait: a check that finds each answer spent
	// by others and waits on the next question would otherwise wait
	// without end while answers keep coming.
	var timer *time.Timer
	var asked int64   // when the check first waited
	var queued int64  // its hits, once counted waiting
	var askedAt int64 // when it sent its question
	reasked := false
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if queued > 0 {
			n.borrows.dequeue(rk, queued)
		}
	}()
	for first := true; ; first = false {
		if !first {
			// Woken by an answer that did not bring enough: decide again,
			// asking in turn if need be.
			d, again, err := n.replica.DecideAgain(n.now(), rule, key, hits, n.borrows.waitingBesides(rk, queued), tk)
			if err != nil || again == nil {
				return d, err
			}
			ask = again
		}
		now := n.now()
		if asked == 0 {
			asked = now
		}
		if _, silent := n.borrows.silentSince(ask.To); silent {
			// The owner left the last question unanswered: decide now, and
			// let the next sync round find out whether it is back.
			n.metrics.BorrowTimeouts.Add(1)
			return n.settleUnanswered(now, rk, hits, ask.To, asked, tk)
		}
		// Numbered as it is queued (sendInOrder); until then no answer is
		// taken for its.
		f, mine := n.borrows.start(rk, math.MaxUint64, now, n.cfg.BorrowTimeout)
		if mine {
			n.metrics.Borrows.Add(1)
			askedAt = n.now()
			n.sendInOrder(ask, askedAt, f)
		}
		if queued == 0 && hits > 0 {
			queued = hits
			n.borrows.enqueue(rk, hits)
		}
		switch {
		case timer == nil:
			timer = time.NewTimer(n.cfg.BorrowTimeout)
		case mine:
			// The question it sends gets the whole timeout, so that an
			// owner is taken for silent only when a question to it went
			// unanswered that long. A check asks once, and once more only
			// if the answer came in the next window: its wait is at most
			// two timeouts, three across a window boundary.
			timer.Reset(n.cfg.BorrowTimeout)
		}
		err := n.awaitAnswer(ctx, f, timer.C)
		if errors.Is(err, errAnswerLate) && mine {
			// Unanswered: the next check asks anew. A question whose asker
			// went away (its context ended) is still in flight, and the
			// checks waiting on it still wait for its answer.
			n.borrows.drop(rk, f)
		}
		switch {
		case ctx.Err() != nil:
			return window.Decision{}, ctx.Err()
		case errors.Is(err, ErrClosed):
			return window.Decision{}, err
		case !mine && err == nil:
			// Another check on the key asked; its answer may bring enough
			// for this one too, or this one asks in turn.
			continue
		case err == nil && !reasked && n.crossedWindow(rule, askedAt, n.now()):
			// The answer is for the window the question was asked in, and
			// that one has ended: ask about this one, once.
			reasked = true
			continue
		case err != nil:
			n.metrics.BorrowTimeouts.Add(1)
			if mine {
				n.borrows.markSilent(ask.To, asked)
			}
			return n.settleUnanswered(n.now(), rk, hits, ask.To, asked, tk)
		}
		return n.replica.Settle(n.now(), rule, key, hits, counter.Answered, tk)
	}
}

// errAnswerLate is a check's borrow timeout passing before the answer came.
var errAnswerLate = errors.New("no answer within the borrow timeout")

// awaitAnswer waits until f is answered, expired fires (the check's borrow
// timeout: errAnswerLate) or ctx ends.
func (n *Node) awaitAnswer(ctx context.Context, f *flight, expired <-chan time.Time) error {
	select {
	case <-f.done:
		return nil
	case <-expired:
		return errAnswerLate
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return ErrClosed
	}
}

// crossedWindow reports whether moments from and to fall in different
// windows of rule.
func (n *Node) crossedWindow(rule string, from, to int64) bool {
	t := n.replica.Table(rule)
	if t == nil {
		return false
	}
	w := t.Rule().Window
	return window.Index(from, w) != window.Index(to, w)
}
