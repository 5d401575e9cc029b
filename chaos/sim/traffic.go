package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// Traffic yields a scenario's request arrivals in time order: when (Unix
// nanoseconds), and at which node. The simulator and the wall-clock bench
// draw the same arrivals from it.
type Traffic interface {
	Next() (at int64, node int, ok bool)
}

// NewTraffic returns the arrivals of scenario c for a run starting at start.
func NewTraffic(c *Config, start int64) Traffic {
	if c.Burst {
		return &burst{start: start, nodes: int64(c.Nodes), limit: c.Limit, spread: c.Sync / 2}
	}
	return newSteady(c, start, rand.New(rand.NewPCG(c.Seed, 0xa77)))
}

// steady is a stream of requests at a total rate, dealt to nodes by smooth
// weighted round-robin (plain round-robin for an even split), as a load
// balancer in front of the gateways does.
type steady struct {
	start, end int64
	rate       float64
	poisson    bool
	rng        *rand.Rand
	k          int64   // arrivals so far (uniform)
	t          float64 // last arrival, seconds since start (poisson)

	weights []float64
	current []float64
	shiftAt int64 // 0: no shift
}

func newSteady(c *Config, start int64, rng *rand.Rand) *steady {
	s := &steady{start: start, end: start + int64(c.Duration), rate: c.Rate,
		poisson: c.Arrivals == Poisson, rng: rng}
	s.weights = make([]float64, c.Nodes)
	s.current = make([]float64, c.Nodes)
	for i := range s.weights {
		s.weights[i] = 1 / float64(c.Nodes)
		if c.Skewed {
			if i == 0 {
				s.weights[i] = c.Skew
			} else {
				s.weights[i] = (1 - c.Skew) / float64(c.Nodes-1)
			}
		}
	}
	if c.Skewed && c.Nodes == 1 {
		s.weights[0] = 1
	}
	if c.Shift > 0 {
		s.shiftAt = start + int64(c.Shift)
	}
	return s
}

// Next returns the next arrival.
func (s *steady) Next() (int64, int, bool) {
	var at int64
	if s.poisson {
		s.t += s.rng.ExpFloat64() / s.rate
		at = s.start + int64(math.Round(s.t*1e9))
	} else {
		at = s.start + int64(math.Round(float64(s.k)*1e9/s.rate))
		s.k++
	}
	if at >= s.end {
		return 0, 0, false
	}
	if s.shiftAt > 0 && at >= s.shiftAt {
		return at, 1, true
	}
	return at, s.pick(), true
}

// pick is smooth weighted round-robin: deterministic, and as even as the
// weights allow over any stretch of requests.
func (s *steady) pick() int {
	best := 0
	for i, w := range s.weights {
		s.current[i] += w
		if s.current[i] > s.current[best] {
			best = i
		}
	}
	s.current[best]--
	return best
}

// burst gives every node limit requests for a fresh key, spread evenly over
// the first half sync interval, then nothing.
type burst struct {
	start  int64
	nodes  int64
	limit  int64
	spread time.Duration
	g      int64
}

// Next returns the next arrival.
func (b *burst) Next() (int64, int, bool) {
	if b.g >= b.nodes*b.limit {
		return 0, 0, false
	}
	j, node := b.g/b.nodes, b.g%b.nodes
	b.g++
	return b.start + j*int64(b.spread)/b.limit, int(node), true
}
