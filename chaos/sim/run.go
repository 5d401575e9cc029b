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
	for q.Len() > 0 {
		e := q.pop()
		if e.at >= end {
			break
		}
		switch e.kind {
		case evRequest:
			d, err := nodes[e.node].Allow(e.at, rule.Name, simKey, 1)
			if err != nil {
				return nil, err
			}
			rec.Request(e.at, e.node, d.Allowed)
			if at, node, ok := src.Next(); ok {
				q.push(event{at: at, kind: evRequest, node: node})
			}
		case evTick:
			r := nodes[e.node]
			for _, o := range r.Tick(e.at) {
				q.push(event{at: e.at + int64(c.Latency), kind: evDeliver, node: index[o.To], delta: o.Delta})
				rec.SyncTraffic(1, int64(o.Delta.Size()))
				rec.SyncBytes(int64(cluster.WireSize(o.Delta)))
			}
			q.push(event{at: max(r.NextTick(), e.at+1), kind: evTick, node: e.node})
		case evDeliver:
			if _, err := nodes[e.node].Receive(e.at, e.delta); err != nil {
				return nil, err
			}
		}
	}
	return rec.Result(), nil
}
