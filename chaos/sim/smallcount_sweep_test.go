//go:build sweep

package sim

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// smallCase is one small-count scenario against one exact limiter on the
// same arrivals.
type smallCase struct {
	name string
	// ratio is what the fleet admitted over what the exact limiter did.
	ratio float64
	// over is the fleet's fullest window above the count, in hits.
	over int64
	// refused is the share of demand refused beyond the exact limiter's,
	// in %, when demand is below the limit.
	refused float64
}

// TestSmallCountSweep runs owner allocation over counts of 1 to 50 per
// window (logins, password resets, SMS sends), 2 to 16 nodes, demand from
// 0.5 to 6 times the limit, fixed and sliding windows, uniform and Poisson
// arrivals, against one exact limiter on the same arrivals, at the
// simulator's latency or SWEEP_LATENCY's. About 20 s:
//
//	go test -tags sweep -run 'TestSmallCountSweep$' -v ./chaos/sim
func TestSmallCountSweep(t *testing.T) {
	windows := [][2]time.Duration{
		{time.Second, 200 * time.Millisecond}, {10 * time.Second, 200 * time.Millisecond}, {time.Minute, time.Second},
	}
	latency := sweepLatency(t)
	var cases []smallCase
	var ratioSum, refusedSum float64
	var nRefused int
	for _, count := range []int64{1, 2, 3, 5, 10, 20, 50} {
		for _, n := range []int{2, 3, 5, 8, 16} {
			for _, load := range []float64{0.5, 0.9, 1.5, 3, 6} {
				for _, ws := range windows {
					for _, typ := range []window.Type{window.Fixed, window.Sliding} {
						for _, arr := range []Arrivals{Uniform, Poisson} {
							c := Defaults()
							c.Alloc, c.Nodes, c.Limit, c.Window, c.Sync, c.Type, c.Arrivals = window.Owner, n, count, ws[0], ws[1], typ, arr
							c.Rate, c.Duration, c.Latency = load*float64(count)/ws[0].Seconds(), 12*ws[0], latency
							r, err := Run(c)
							if err != nil {
								t.Fatal(err)
							}
							one := c
							one.Nodes = 1
							ref, err := Run(one)
							if err != nil {
								t.Fatal(err)
							}
							sc := smallCase{name: fmt.Sprintf("count=%d n=%d load=%.1f window=%v sync=%v %v %v", count, n, load, ws[0], ws[1], typ, arr),
								ratio: 1, over: r.MaxWindowAdmitted - count}
							if ref.AdmittedTotal > 0 {
								sc.ratio = float64(r.AdmittedTotal) / float64(ref.AdmittedTotal)
							}
							if load < 1 && r.DemandTotal > 0 {
								sc.refused = float64(r.RefusedTotal-ref.RefusedTotal) / float64(r.DemandTotal) * 100
								refusedSum += sc.refused
								nRefused++
							}
							ratioSum += sc.ratio
							cases = append(cases, sc)
						}
					}
				}
			}
		}
	}
	worst := func(less func(a, b smallCase) bool, show func(smallCase) string) {
		sort.Slice(cases, func(i, j int) bool { return less(cases[i], cases[j]) })
		for _, c := range cases[:min(5, len(cases))] {
			t.Logf("  %s  %s", show(c), c.name)
		}
	}
	t.Log("least admitted against one exact limiter:")
	worst(func(a, b smallCase) bool { return a.ratio < b.ratio }, func(c smallCase) string { return fmt.Sprintf("%.1f%%", 100*c.ratio) })
	t.Log("most refused below the limit:")
	worst(func(a, b smallCase) bool { return a.refused > b.refused }, func(c smallCase) string { return fmt.Sprintf("%.2f%%", c.refused) })
	above := 0
	for _, c := range cases {
		if c.over > 0 {
			above++
			t.Errorf("%s: a window admitted %d over the count", c.name, c.over)
		}
	}
	mean := 100 * ratioSum / float64(len(cases))
	meanRefused := refusedSum / float64(max(nRefused, 1))
	t.Logf("%d scenarios, latency %v: mean admitted %.1f%% of one exact limiter's; %d with a window above the count; below the limit %.2f%% of demand refused beyond the exact limiter",
		len(cases), latency, mean, above, meanRefused)
	if mean < 97 {
		t.Errorf("mean admitted %.1f%% of one exact limiter's, want ≥ 97%%", mean)
	}
	if meanRefused > 1 {
		t.Errorf("%.2f%% of demand below the limit refused beyond one exact limiter, want ≤ 1%%", meanRefused)
	}
}
