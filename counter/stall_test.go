package counter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/window"
)

// TestOwnedStalledLinksNeverOvershoot is TestOwnedNeverOvershoots over
// lossy links: each message may be lost and resent, as a stream's
// segments are, after a retransmission timeout that doubles, and holds
// back the messages behind it on its link, so that a link stalls for a
// second or more now and then; checks wait a borrow timeout for an
// owner's answer and are then refused beyond their grant. No node is
// down, so however long a link stalls, no node decides as if a key's
// owner were lost, and the fleet never admits a check that one exact
// limiter would refuse. Fixed windows only: over stalled links a sliding
// window's grant lines still let a hit through now and then that one
// exact limiter refuses, a known fault not yet mended: a line granted while
// the window before is known only as a bound above its count (a node that
// has not reported what it spent there) grows faster than the count truly
// decays. TestStalledSlidingCases holds the cases found and mended so far.
func TestOwnedStalledLinksNeverOvershoot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		run := drawRun(rt, 8, 300)
		run.r.Type = window.Fixed
		c := stalledCase{run: run,
			loss: rapid.Float64Range(0, 0.3).Draw(rt, "loss"), load: rapid.Float64Range(0.5, 6).Draw(rt, "load"),
			keys: rapid.IntRange(1, 3).Draw(rt, "keys"), seed: rapid.Uint64().Draw(rt, "seed")}
		if over := c.play(rt); over != "" {
			rt.Fatal(over)
		}
	})
}

// TestStalledSlidingCases replays sliding-window cases of
// TestOwnedStalledLinksNeverOvershoot that once let a hit through: a grant
// that grows with time, raised for hits its holder spent on the grant
// before it, started above the room one exact limiter had when it started
// (3 nodes, 40 per 10 s, the 24th hit at 5.57 s with 37 in the window
// before, where the exact estimate leaves room for 23).
func TestStalledSlidingCases(t *testing.T) {
	sliding := func(n int, count int64, w, sync, latency time.Duration) drawnRun {
		return drawnRun{n: n, latency: latency,
			r: window.Rule{Name: "api", Count: count, Window: w, Type: window.Sliding, SyncInterval: sync}}
	}
	tests := []struct {
		name string
		c    stalledCase
	}{
		{"raised line", stalledCase{run: sliding(3, 40, 10*time.Second, 100*time.Millisecond, 1),
			loss: 0.14337158203125, load: 3.4375, keys: 1, seed: 0x5989}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if over := tt.c.play(t); over != "" {
				t.Fatal(over)
			}
		})
	}
}

// stalledCase is one run of TestOwnedStalledLinksNeverOvershoot: the fleet
// and rule, the chance a message is lost, the demand as a multiple of the
// count, over how many keys, and the seed of the network and the checks.
type stalledCase struct {
	run        drawnRun
	loss, load float64
	keys       int
	seed       uint64
}

// play plays the case and returns the first admission one exact limiter
// refuses, or "".
func (c stalledCase) play(t failer) string {
	n, r, w := c.run.n, c.run.r, c.run.r.Window
	s := newNetSim(t, n, r, c.run.latency, t0, c.seed)
	s.borrowTimeout = int64(250 * time.Millisecond)
	lost := rand.New(rand.NewPCG(c.seed, 17))
	s.stall = func(i, j int, at int64) int64 {
		var extra int64
		rto := int64(200*time.Millisecond + 2*c.run.latency)
		for lost.Float64() < c.loss {
			extra += rto
			rto *= 2
		}
		return extra
	}
	rng := rand.New(rand.NewPCG(c.seed, 19))
	checks := int(c.load * float64(r.Count) * 3)
	span := 3 * int64(w)
	for range min(checks, 3_000) {
		node := min(int(rng.ExpFloat64()*float64(n)/3), n-1)
		s.check(t0+rng.Int64N(span), node, fmt.Sprintf("k%d", rng.IntN(c.keys)))
	}
	s.run(t0 + span + int64(time.Minute))
	return s.over
}
