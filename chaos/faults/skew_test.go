package faults

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestClockSkew runs a batched fleet with one node's clock 100 ms ahead,
// or behind, on 1 s fixed windows (where skew hurts most: the skewed node
// opens and closes each window early or late), and counts each admission
// in the window of its true time (its decision time less the node's skew).
// Every window after the first must stay within
//
//	count × (1 ± skew ÷ window) ± 10 % (the policy's slack).
//
// The first window of traffic gets a wider ceiling: under demand far above
// the count, fixed windows are spent as soon as they open, and the skewed
// node opens its next window (ahead) or its previous one (behind) alone for
// skew's length of that first window, spending up to its rate × skew of a
// fresh budget that later windows give back. So its ceiling is
// count + max(count × skew ÷ window, r × skew) + 10 %, where r is the
// skewed node's rate on the rule. The floor holds for windows whose checks
// asked for more than the ceiling: a machine too busy to make them is not
// the fleet refusing.
func TestClockSkew(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3-node fleets for ~16 s")
	}
	for _, tc := range []struct {
		name string
		skew time.Duration
	}{{"ahead", 100 * time.Millisecond}, {"behind", -100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seed := seedFor(t)
			const (
				count  = 100
				w      = time.Second
				sync   = 100 * time.Millisecond
				rate   = 300.0
				skewed = "n2"
			)
			abs := tc.skew.Abs()
			skewPart := int64(count * abs / w)
			firstPart := max(skewPart, int64(rate/2*abs.Seconds()))
			slack := int64(count / 10)
			f := startFleet(t, Options{Nodes: 3, Rules: batchedRules(count, w, sync, window.Fixed), Seed: seed})
			f.Net.SkewClock(skewed, tc.skew)
			f.Mark("skew " + skewed + " " + tc.skew.String())
			start := f.Net.AlignNext(w, 200*time.Millisecond)
			hold(time.Duration(start - f.Net.Now()))
			load := f.Drive(Traffic{Rate: rate, Workers: 2, Pick: pickBatched, Seed: seed})
			hold(8 * w)
			recs := load.Stop()
			if bad := errorsOf(recs); len(bad) > 0 {
				t.Fatalf("%d checks failed; first: %s: %v", len(bad), bad[0].Node, bad[0].Err)
			}
			trueAt := func(r Record) int64 {
				if r.Node == skewed {
					return r.D.At - int64(tc.skew)
				}
				return r.D.At
			}
			tally := Count(recs, "api", w, trueAt, nil)
			// The hits asked for in each true window: a machine too busy
			// to make the checks leaves a window short of demand, and the
			// floor is for windows whose demand exceeded the count.
			asked := map[int64]int64{}
			for _, r := range recs {
				if r.Rule == "api" {
					asked[window.Index(trueAt(r), w)] += r.Hits
				}
			}
			byNode := Count(recs, "api", w, DecidedAt, nil)
			windows := tally.Windows()
			hi, lo := count+skewPart+slack, count-skewPart-slack
			first := count + firstPart + slack
			worst, least := int64(0), int64(count*10)
			var sum, firstAll int64
			full := 0
			for i, idx := range windows {
				all := tally.Sum(idx)
				if i > 0 && i < len(windows)-1 {
					sum += all
					full++
				}
				if i == 0 {
					firstAll = all
					if all > first {
						t.Errorf("first true window: the fleet admitted %d, bound %d (count %d + %d + slack %d)",
							all, first, count, firstPart, slack)
					}
					continue
				}
				worst = max(worst, all)
				if all > hi {
					t.Errorf("true window %d: the fleet admitted %d, bound %d (count %d + skew share %d + slack %d)",
						i, all, hi, count, skewPart, slack)
				}
				// The last window is partly without traffic.
				if i == len(windows)-1 {
					continue
				}
				if asked[idx] < hi {
					t.Logf("true window %d: only %d hits asked (the load fell behind), %d admitted: no floor", i, asked[idx], all)
					continue
				}
				least = min(least, all)
				if all < lo {
					t.Errorf("true window %d: the fleet admitted only %d of %d asked, floor %d", i, all, asked[idx], lo)
				}
			}
			_, worstByNode := byNode.Worst()
			t.Logf("%s %v on %v windows of %d: first true window %d (bound %d); later worst %d (%+.0f%%), least %d (%+.0f%%), bounds [%d, %d]; mean of full windows %.1f; by the deciding node's clock worst %d",
				skewed, tc.skew, w, count, firstAll, first, worst, pct(worst, count), least, pct(least, count), lo, hi,
				float64(sum)/float64(max(full, 1)), worstByNode)
		})
	}
}
