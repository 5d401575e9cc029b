//go:build sweep

package sim

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// sweepCase is one scenario of a sweep and how the allocation policy did
// against one exact limiter on the same arrivals.
type sweepCase struct {
	name string
	sync time.Duration
	over float64 // the worst window's error, %
	// under is how far the median window falls below the exact limiter's,
	// in points, when demand is above the limit.
	under float64
	// refused is the share of demand refused beyond what the exact limiter
	// refused, in %, when demand is below the limit.
	refused float64
}

// sweepGrid is the scenarios of a sweep: every combination.
type sweepGrid struct {
	nodes   []int
	loads   []float64 // × the limit
	windows [][2]time.Duration
	splits  []string // "even", "skew:S" or "shift"
	latency time.Duration
	alloc   window.Allocation
}

// sweepLatency is the network latency of a sweep: the simulator's, or
// SWEEP_LATENCY's.
func sweepLatency(t *testing.T) time.Duration {
	l := Defaults().Latency
	if v := os.Getenv("SWEEP_LATENCY"); v != "" {
		var err error
		if l, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SWEEP_LATENCY: %v", err)
		}
	}
	return l
}

// run runs every scenario of g, and one exact limiter on each one's
// arrivals, and logs the worst cases and the averages.
func (g sweepGrid) run(t *testing.T) (cases []sweepCase, meanUnder, meanRefused float64) {
	var underSum, refusedSum float64
	var nUnder, nRefused int
	for _, n := range g.nodes {
		for _, load := range g.loads {
			for _, ws := range g.windows {
				for _, typ := range []window.Type{window.Fixed, window.Sliding} {
					for _, arr := range []Arrivals{Uniform, Poisson} {
						for _, split := range g.splits {
							c := Defaults()
							c.Alloc, c.Nodes, c.Limit, c.Window, c.Sync, c.Type, c.Arrivals = g.alloc, n, 500, ws[0], ws[1], typ, arr
							c.Rate, c.Duration, c.Latency = load*float64(c.Limit)/ws[0].Seconds(), 12*ws[0], g.latency
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
								sync: ws[1], over: max(r.FirstWindowErrorPct, r.LaterWindowsErrorPct.Max)}
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
		for _, c := range cases[:min(5, len(cases))] {
			t.Logf("  %s  %s", show(c), c.name)
		}
	}
	t.Log("most refused below the limit:")
	worst(func(a, b sweepCase) bool { return a.refused > b.refused }, func(c sweepCase) string { return fmt.Sprintf("%.1f%%", c.refused) })
	t.Log("furthest under one exact limiter:")
	worst(func(a, b sweepCase) bool { return a.under < b.under }, func(c sweepCase) string { return fmt.Sprintf("%+.1f points", c.under) })
	t.Log("most over the limit:")
	worst(func(a, b sweepCase) bool { return a.over > b.over }, func(c sweepCase) string { return fmt.Sprintf("%+.1f%%", c.over) })
	if nUnder > 0 {
		meanUnder = underSum / float64(nUnder)
	}
	if nRefused > 0 {
		meanRefused = refusedSum / float64(nRefused)
	}
	t.Logf("%d scenarios, latency %v: worst window %+.1f%%; above the limit the median window is on average %+.2f points from one exact limiter's; below it %.2f%% of demand is refused beyond what one exact limiter refuses",
		len(cases), g.latency, cases[0].over, meanUnder, meanRefused)
	return cases, meanUnder, meanRefused
}

// checkOver fails for a scenario over limit % whose sync interval is at
// least minSync; shorter ones, where claims made within a latency of each
// other are no longer rare, are reported only.
func checkOver(t *testing.T, cases []sweepCase, minSync time.Duration, limit float64) {
	for _, c := range cases {
		if c.sync >= minSync && c.over > limit {
			t.Errorf("%s: a window %+.1f%% over the limit, want none over %+.0f%%", c.name, c.over, limit)
		}
	}
}

// TestSweepAdaptive runs adaptive allocation over 2,400 scenarios that no
// acceptance test names: node counts, loads below and above the limit,
// ratios of sync to window, both window types, uniform and Poisson
// arrivals, even, skewed and shifting demand. It bounds the worst
// overshoot and the average shortfall against one exact limiter, and logs
// the worst cases. About 30 s; run with
//
//	go test -tags sweep ./chaos/sim -run 'SweepAdaptive$' -v
//
// SWEEP_LATENCY=5ms (say) runs it over a slower network.
func TestSweepAdaptive(t *testing.T) {
	g := mainGrid(t)
	g.alloc = window.Adaptive
	cases, meanUnder, meanRefused := g.run(t)
	checkOver(t, cases, 20*g.latency, 3)
	if meanUnder < -1.2 {
		t.Errorf("median windows on average %.2f points under one exact limiter, want at most 1.2", -meanUnder)
	}
	if meanRefused > 0.8 {
		t.Errorf("%.2f%% of demand below the limit refused beyond one exact limiter, want at most 0.8%%", meanRefused)
	}
}

// mainGrid is the 2,400 scenarios of the adaptive and owner sweeps.
func mainGrid(t *testing.T) sweepGrid {
	return sweepGrid{
		nodes: []int{2, 3, 5, 8, 16},
		loads: []float64{0.5, 0.9, 1.1, 1.6, 4},
		windows: [][2]time.Duration{
			{time.Second, 50 * time.Millisecond}, {time.Second, 200 * time.Millisecond},
			{time.Second, 500 * time.Millisecond}, {2 * time.Second, 300 * time.Millisecond},
			{10 * time.Second, 200 * time.Millisecond}, {time.Minute, time.Second},
		},
		splits:  []string{"even", "skew:0.7", "skew:0.95", "shift"},
		latency: sweepLatency(t),
	}
}

// TestSweepAdaptiveShortSync runs sync intervals of 10 and 20 ms, ten and
// twenty times the simulator's latency, over 2 to 16 nodes, loads around
// and above the limit, both window types and both arrival shapes: there
// nodes often sync within a latency of each other. About 10 s.
//
//	go test -tags sweep ./chaos/sim -run SweepAdaptiveShortSync -v
func TestSweepAdaptiveShortSync(t *testing.T) {
	g := sweepGrid{
		nodes:   []int{2, 3, 5, 8, 16},
		loads:   []float64{0.9, 1.1, 1.6, 4},
		windows: [][2]time.Duration{{time.Second, 10 * time.Millisecond}, {time.Second, 20 * time.Millisecond}},
		splits:  []string{"even"},
		latency: sweepLatency(t),
		alloc:   window.Adaptive,
	}
	cases, meanUnder, _ := g.run(t)
	checkOver(t, cases, 10*g.latency, 1)
	if meanUnder < -1.2 {
		t.Errorf("median windows on average %.2f points under one exact limiter, want at most 1.2", -meanUnder)
	}
}

// TestSweepOwner runs owner allocation over the 2,400 scenarios of
// TestSweepAdaptive, with the same bounds on the worst window and the
// average shortfall. About 50 s:
//
//	go test -tags sweep ./chaos/sim -run 'SweepOwner$' -v
func TestSweepOwner(t *testing.T) {
	g := mainGrid(t)
	g.alloc = window.Owner
	cases, meanUnder, meanRefused := g.run(t)
	checkOver(t, cases, 0, 1)
	if meanUnder < -1.2 {
		t.Errorf("median windows on average %.2f points under one exact limiter, want at most 1.2", -meanUnder)
	}
	if meanRefused > 0.8 {
		t.Errorf("%.2f%% of demand below the limit refused beyond one exact limiter, want at most 0.8%%", meanRefused)
	}
}
