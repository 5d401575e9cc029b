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
		r, err := counter.NewReplica(counter.Config{Self: incs[i], Rules: []window.Rule{rule}, Start: start, Phase: phase})
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
	// Checks a node left undecided for the key's owner wait, in arrival
	// order, for its answer; asked is the question's sequence, 0 for none.
	waiting := make([]int, c.Nodes)
	asked := make([]uint64, c.Nodes)
	// decide decides one check at node i at moment at, or asks the owner
	// unless a question is in flight; it reports whether the check was
	// decided. A check that waited is decided again, its demand counted
	// when it arrived, as a node does.
	decide := func(i int, at int64, again bool) (bool, error) {
		decide := nodes[i].Decide
		if again {
			decide = nodes[i].DecideAgain
		}
		d, ask, err := decide(at, rule.Name, simKey, 1)
		if err != nil {
			return false, err
		}
		if ask != nil {
			if asked[i] == 0 {
				asked[i] = ask.Delta.Seq
				send(at, *ask)
			}
			return false, nil
		}
		rec.Request(at, i, d.Allowed)
		return true, nil
	}
	for q.Len() > 0 {
		e := q.pop()
		if e.at >= end {
			break
		}
		switch e.kind {
		case evRequest:
			if done, err := decide(e.node, e.at, false); err != nil {
				return nil, err
			} else if !done {
				waiting[e.node]++
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
		case evDeliver:
			res, err := nodes[e.node].Receive(e.at, e.delta)
			if err != nil {
				return nil, err
			}
			if res.Reply != nil {
				send(e.at, *res.Reply)
			}
			if asked[e.node] == 0 || !answers(e.delta, asked[e.node]) {
				continue
			}
			asked[e.node] = 0
			d, err := nodes[e.node].Settle(e.at, rule.Name, simKey, 1, counter.Answered)
			if err != nil {
				return nil, err
			}
			rec.Request(e.at, e.node, d.Allowed)
			waiting[e.node]--
			for waiting[e.node] > 0 {
				done, err := decide(e.node, e.at, true)
				if err != nil {
					return nil, err
				}
				if !done {
					break
				}
				waiting[e.node]--
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
