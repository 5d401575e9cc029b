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
// exact limiter refuses, a known fault not yet mended: one case in about
// 8,000 with sliding windows drawn (3 nodes, count 40 per 10 s, sync
// 100 ms, 14 % loss: the 24th hit at 5.57 s with 37 in the window before,
// where the exact estimate leaves room for 23).
func TestOwnedStalledLinksNeverOvershoot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		run := drawRun(rt, 8, 300)
		run.r.Type = window.Fixed
		n, r, w, latency := run.n, run.r, run.r.Window, run.latency
		loss := rapid.Float64Range(0, 0.3).Draw(rt, "loss")
		load := rapid.Float64Range(0.5, 6).Draw(rt, "load")
		keys := rapid.IntRange(1, 3).Draw(rt, "keys")
		seed := rapid.Uint64().Draw(rt, "seed")
		s := newNetSim(rt, n, r, latency, t0, seed)
		s.borrowTimeout = int64(250 * time.Millisecond)
		lost := rand.New(rand.NewPCG(seed, 17))
		s.stall = func(i, j int, at int64) int64 {
			var extra int64
			rto := int64(200*time.Millisecond + 2*latency)
			for lost.Float64() < loss {
				extra += rto
				rto *= 2
			}
			return extra
		}
		rng := rand.New(rand.NewPCG(seed, 19))
		checks := int(load * float64(r.Count) * 3)
		span := 3 * int64(w)
		for range min(checks, 3_000) {
			node := min(int(rng.ExpFloat64()*float64(n)/3), n-1)
			s.check(t0+rng.Int64N(span), node, fmt.Sprintf("k%d", rng.IntN(keys)))
		}
		s.run(t0 + span + int64(time.Minute))
		if s.over != "" {
			rt.Fatal(s.over)
		}
	})
}
