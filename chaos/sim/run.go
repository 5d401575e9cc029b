package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// epoch is where virtual time starts: an arbitrary, realistic Unix time,
// moved forward to a window boundary.
const epoch = int64(1_800_000_000) * int64(time.Second)

// Start returns the moment a run of c starts: epoch moved to a boundary of
// c's windows.
func Start(c *Config) int64 { return (epoch/int64(c.Window) + 1) * int64(c.Window) }

// simKey is the one key every simulated request is for.
const simKey = "k"

// progressEvery is how many events Run handles between two calls of
// Config.Progress: a few milliseconds' worth.
const progressEvery = 1 << 14

// Run simulates the scenario c and returns what every window admitted. The
// same Config gives the same Result, bit for bit.
func Run(c Config) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rule := c.Rule()
	start := Start(&c)
	end := start + int64(c.Duration)
	// Phases and arrivals draw from separate streams, so that the same seed
	// gives the same arrivals whatever the number of nodes.
	phases := rand.New(rand.NewPCG(c.Seed, 0x5eed))

	nodes := make([]*counter.Replica, c.Nodes)
	index := make(map[counter.Incarnation]int, c.Nodes)
	incs := make([]counter.Incarnation, c.Nodes)
	for i := range nodes {
		incs[i] = counter.Incarnation{Node: fmt.Sprintf("n%02d", i), Boot: 1}
		index[incs[i]] = i
		// Each node syncs at its own phase, as independently started
		// gateways do.
		phase := time.Duration(phases.Int64N(int64(c.Sync)))
		r, err := counter.NewReplica(counter.Config{Self: incs[i], Rules: []window.Rule{rule}, Start: start, Phase: phase,
			AskTimeout: c.borrowTimeout()})
		if err != nil {
			return nil, err
		}
		nodes[i] = r
	}
	for _, r := range nodes {
		r.SetPeers(incs)
	}

	src := NewTraffic(&c, start)
	rec := NewRecorder(&c, start)
	q := &queue{}
	for i, r := range nodes {
		q.push(event{at: r.NextTick(), kind: evTick, node: i})
	}
	if at, node, ok := src.Next(); ok {
		q.push(event{at: at, kind: evRequest, node: node})
	}
	send := func(at int64, o counter.Outbound) {
		q.push(event{at: at + int64(c.Latency), kind: evDeliver, node: index[o.To], delta: o.Delta})
		rec.SyncTraffic(1, int64(o.Delta.Size()))
		rec.SyncBytes(int64(cluster.WireSize(o.Delta)))
	}
	// Checks a node left undecided for the key's owner wait for its answer
	// as a cluster node's do (borrowing), each up to the borrow timeout.
	borrows := make([]*borrowing, c.Nodes)
	for i := range borrows {
		borrows[i] = newBorrowing(c.borrowTimeout())
	}
	settle := func(i int, at int64, outcome counter.Outcome) error {
		d, err := nodes[i].Settle(at, rule.Name, simKey, 1, outcome, nil)
		if err != nil {
			return err
		}
		rec.Request(at, i, d.Allowed)
		return nil
	}
	// decide decides a check at node i at moment at, or reports that it
	// waits for the owner's answer, having asked unless a question is in
	// flight; others more checks wait there besides those queued. A check
	// that waited is decided again, its demand counted when it arrived.
	decide := func(i int, at int64, again bool, others int) (waits, asker bool, err error) {
		decide := nodes[i].Decide
		if again {
			decide = nodes[i].DecideAgain
		}
		d, ask, err := decide(at, rule.Name, simKey, 1, int64(len(borrows[i].waiting)+others), nil)
		if err != nil {
			return false, false, err
		}
		if ask == nil {
			rec.Request(at, i, d.Allowed)
			return false, false, nil
		}
		b := borrows[i]
		if b.flight != 0 {
			return true, false, nil
		}
		if _, silent := b.silent[ask.To]; silent {
			// The owner left the last question unanswered: decide now, as
			// a node does.
			return false, false, settle(i, at, b.outcome(ask.To))
		}
		b.start(ask.Delta.Seq, ask.To, at)
		send(at, *ask)
		return true, true, nil
	}
	// wait queues a check at node i that arrived at moment at, and the
	// moment it gives up; rewait queues again, at moment at, a check an
	// answer left short.
	wait := func(i int, at int64, asker bool) {
		if borrows[i].wait(at, asker) {
			q.push(event{at: at + borrows[i].timeout, kind: evGiveUp, node: i})
		}
	}
	rewait := func(i int, w waiter, at int64, asker bool) {
		if borrows[i].rewait(w, at, asker) {
			q.push(event{at: borrows[i].waiting[len(borrows[i].waiting)-1].until, kind: evGiveUp, node: i})
		}
	}
	waiting := func() bool {
		for _, b := range borrows {
			if len(b.waiting) > 0 {
				return true
			}
		}
		return false
	}
	steps := 0
	for q.Len() > 0 {
		e := q.pop()
		if steps++; c.Progress != nil && steps%progressEvery == 0 {
			c.Progress(time.Duration(min(e.at, end)-start), c.Duration)
		}
		if e.at >= end {
			// Nothing arrives after the end; checks that arrived before it
			// and wait for their owner's answer are still decided, as a
			// node decides them, and counted in the totals only.
			if !waiting() {
				break
			}
			if e.kind == evRequest || e.kind == evTick {
				continue
			}
		}
		switch e.kind {
		case evRequest:
			waits, asker, err := decide(e.node, e.at, false, 0)
			if err != nil {
				return nil, err
			}
			if waits {
				wait(e.node, e.at, asker)
			}
			if at, node, ok := src.Next(); ok {
				q.push(event{at: at, kind: evRequest, node: node})
			}
		case evTick:
			r := nodes[e.node]
			for _, o := range r.Tick(e.at) {
				send(e.at, o)
			}
			q.push(event{at: max(r.NextTick(), e.at+1), kind: evTick, node: e.node})
		case evGiveUp:
			b := borrows[e.node]
			for range b.giveUp(e.at) {
				if err := settle(e.node, e.at, b.outcome(b.owner)); err != nil {
					return nil, err
				}
			}
		case evDeliver:
			b := borrows[e.node]
			b.heard(e.delta.From)
			res, err := nodes[e.node].Receive(e.at, e.delta)
			if err != nil {
				return nil, err
			}
			if res.Reply != nil {
				send(e.at, *res.Reply)
			}
			askedAt := b.asked
			woken := b.answered(e.delta)
			for k, w := range woken {
				if w.asker && (w.reasked || window.Index(askedAt, rule.Window) == window.Index(e.at, rule.Window)) {
					if err := settle(e.node, e.at, counter.Answered); err != nil {
						return nil, err
					}
					continue
				}
				// An asker whose answer came in the next window asks about
				// this one, once, as a node does.
				w.reasked = w.reasked || w.asker
				// Another check asked; its answer may bring enough for
				// this one too, or this one asks in turn.
				waits, asker, err := decide(e.node, e.at, true, len(woken)-k-1)
				if err != nil {
					return nil, err
				}
				if waits {
					// What did not fit this check fits none after it:
					// they all wait again, on the question now in flight,
					// each until its own deadline.
					rewait(e.node, w, e.at, asker)
					for _, rest := range woken[k+1:] {
						rewait(e.node, rest, e.at, false)
					}
					break
				}
			}
		}
	}
	return rec.Result(), nil
}

// answers reports whether d is an owner's answer to the question with
// sequence seq, or to a later report.
func answers(d *counter.Delta, seq uint64) bool {
	if d.Kind != counter.KindAnswer {
		return false
	}
	for _, rd := range d.Rules {
		for _, e := range rd.Entries {
			if e.Key == simKey && e.Told >= seq {
				return true
			}
		}
	}
	return false
}
