//go:build sweep

package sim

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// sweepCase is one scenario of the sweep and how adaptive allocation did
// against one exact limiter on the same arrivals.
type sweepCase struct {
	name string
	over float64 // the worst window's error, %
	// under is how far the median window falls below the exact limiter's,
	// in points, when demand is above the limit.
	under float64
	// refused is the share of demand refused beyond what the exact limiter
	// refused, in %, when demand is below the limit.
	refused float64
}

// TestSweepAdaptive runs adaptive allocation over 2,400 scenarios that no
// acceptance test names: node counts, loads below and above the limit,
// ratios of sync to window, both window types, uniform and Poisson
// arrivals, even, skewed and shifting demand. It bounds the worst
// overshoot and the average shortfall against one exact limiter, and logs
// the worst cases. About 30 s; run with
//
//	go test -tags sweep ./chaos/sim -run Sweep -v
func TestSweepAdaptive(t *testing.T) {
	var cases []sweepCase
	var underSum, refusedSum float64
	var nUnder, nRefused int
	for _, n := range []int{2, 3, 5, 8, 16} {
		for _, load := range []float64{0.5, 0.9, 1.1, 1.6, 4} {
			for _, ws := range [][2]time.Duration{
				{time.Second, 50 * time.Millisecond}, {time.Second, 200 * time.Millisecond},
				{time.Second, 500 * time.Millisecond}, {2 * time.Second, 300 * time.Millisecond},
				{10 * time.Second, 200 * time.Millisecond}, {time.Minute, time.Second},
			} {
				for _, typ := range []window.Type{window.Fixed, window.Sliding} {
					for _, arr := range []Arrivals{Uniform, Poisson} {
						for _, split := range []string{"even", "skew:0.7", "skew:0.95", "shift"} {
							c := Defaults()
							c.Alloc, c.Nodes, c.Limit, c.Window, c.Sync, c.Type, c.Arrivals = window.Adaptive, n, 500, ws[0], ws[1], typ, arr
							c.Rate = load * float64(c.Limit) / ws[0].Seconds()
							c.Duration = 12 * ws[0]
							var err error
							if split == "shift" {
								c.Shift = 4 * ws[0]
							} else if c.Skewed, c.Skew, err = ParseSplit(split); err != nil {
								t.Fatal(err)
							}
							r, err := Run(c)
							if err != nil {
								t.Fatal(err)
							}
							one := c
							one.Nodes, one.Skewed, one.Skew, one.Shift = 1, false, 0, 0
							ref, err := Run(one)
							if err != nil {
								t.Fatal(err)
							}
							sc := sweepCase{name: fmt.Sprintf("n=%d load=%.1f window=%v sync=%v %v %v %s", n, load, ws[0], ws[1], typ, arr, split),
								over: max(r.FirstWindowErrorPct, r.LaterWindowsErrorPct.Max)}
							if load < 1 {
								sc.refused = float64(r.RefusedTotal-ref.RefusedTotal) / float64(r.DemandTotal) * 100
								refusedSum += sc.refused
								nRefused++
							} else {
								sc.under = r.LaterWindowsErrorPct.Median - ref.LaterWindowsErrorPct.Median
								underSum += sc.under
								nUnder++
							}
							cases = append(cases, sc)
						}
					}
				}
			}
		}
	}
	worst := func(less func(a, b sweepCase) bool, show func(sweepCase) string) {
		sort.Slice(cases, func(i, j int) bool { return less(cases[i], cases[j]) })
		for _, c := range cases[:5] {
			t.Logf("  %s  %s", show(c), c.name)
		}
	}
	t.Log("most over the limit:")
	worst(func(a, b sweepCase) bool { return a.over > b.over }, func(c sweepCase) string { return fmt.Sprintf("%+.1f%%", c.over) })
	maxOver := cases[0].over
	t.Log("furthest under one exact limiter:")
	worst(func(a, b sweepCase) bool { return a.under < b.under }, func(c sweepCase) string { return fmt.Sprintf("%+.1f points", c.under) })
	t.Log("most refused below the limit:")
	worst(func(a, b sweepCase) bool { return a.refused > b.refused }, func(c sweepCase) string { return fmt.Sprintf("%.1f%%", c.refused) })
	meanUnder, meanRefused := underSum/float64(nUnder), refusedSum/float64(nRefused)
	t.Logf("%d scenarios: worst window %+.1f%%; above the limit the median window is on average %+.2f points from one exact limiter's; below it %.2f%% of demand is refused beyond what one exact limiter refuses",
		len(cases), maxOver, meanUnder, meanRefused)
	if maxOver > 3 {
		t.Errorf("a window %+.1f%% over the limit, want none over +3%%", maxOver)
	}
	if meanUnder < -1.2 {
		t.Errorf("median windows on average %.2f points under one exact limiter, want at most 1.2", -meanUnder)
	}
	if meanRefused > 0.8 {
		t.Errorf("%.2f%% of demand below the limit refused beyond one exact limiter, want at most 0.8%%", meanRefused)
	}
}
