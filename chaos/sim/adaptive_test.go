package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// adaptiveDraws is how many sync-phase draws each adaptive target is checked
// on; unlike the published reproductions, every draw must meet it.
const adaptiveDraws = 5

type scenario struct {
	limit  int64
	window time.Duration
	dur    time.Duration
}

var (
	perSecond = scenario{500, time.Second, 30 * time.Second}
	perTen    = scenario{1000, 10 * time.Second, 90 * time.Second}
)

func adaptiveRun(t *testing.T, sc scenario, typ window.Type, seed uint64, mutate func(*Config)) *Result {
	t.Helper()
	c := Defaults()
	c.Alloc, c.Limit, c.Window, c.Type, c.Duration, c.Seed = window.Adaptive, sc.limit, sc.window, typ, sc.dur, seed
	if mutate != nil {
		mutate(&c)
	}
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func forDraws(t *testing.T, f func(t *testing.T, typ window.Type, seed uint64)) {
	for _, typ := range []window.Type{window.Fixed, window.Sliding} {
		for seed := uint64(1); seed <= adaptiveDraws; seed++ {
			t.Run(fmt.Sprintf("%v/seed=%d", typ, seed), func(t *testing.T) { f(t, typ, seed) })
		}
	}
}

func TestAdaptivePublishedScenarios(t *testing.T) {
	for _, sc := range []scenario{perSecond, perTen} {
		t.Run(fmt.Sprintf("%d per %v", sc.limit, sc.window), func(t *testing.T) {
			forDraws(t, func(t *testing.T, typ window.Type, seed uint64) {
				r := adaptiveRun(t, sc, typ, seed, nil)
				if r.FirstWindowErrorPct > 2 {
					t.Errorf("first window %+.1f%%, want ≤ +2%%", r.FirstWindowErrorPct)
				}
				if s := r.LaterWindowsErrorPct; s.Min < -2 || s.Max > 2 {
					t.Errorf("later windows %+v, want all within ±2%%", s)
				}
				if c := r.CumulativeErrorPct; c < -1 || c > 1 {
					t.Errorf("cumulative %+.2f%%, want within ±1%%", c)
				}
			})
		})
	}
}

func TestAdaptiveFreshWindowBurst(t *testing.T) {
	for _, n := range []int{2, 4, 8, 16} {
		for seed := uint64(1); seed <= adaptiveDraws; seed++ {
			r := adaptiveRun(t, perSecond, window.Sliding, seed, func(c *Config) {
				c.Nodes, c.Burst, c.Duration = n, true, time.Second
			})
			if a := r.Windows[0].Admitted; float64(a) > 1.05*500 {
				t.Errorf("N=%d seed %d: burst admitted %d, want ≤ 1.05 × 500", n, seed, a)
			}
		}
	}
}

func TestAdaptiveEightNodesSyncFifthOfWindow(t *testing.T) {
	forDraws(t, func(t *testing.T, typ window.Type, seed uint64) {
		r := adaptiveRun(t, perSecond, typ, seed, func(c *Config) { c.Nodes, c.Rate = 8, 4000 })
		if s := r.LaterWindowsErrorPct; s.Min < -3 || s.Max > 3 {
			t.Errorf("later windows %+v, want all within ±3%%", s)
		}
	})
}

func TestAdaptiveSkewedAndShiftingDemand(t *testing.T) {
	demands := map[string]func(*Config){
		"skew:0.9":  func(c *Config) { c.Skewed, c.Skew = true, 0.9 },
		"shift 10s": func(c *Config) { c.Shift = 10 * time.Second },
	}
	for name, mutate := range demands {
		for _, sc := range []scenario{perSecond, perTen} {
			t.Run(fmt.Sprintf("%s/%d per %v", name, sc.limit, sc.window), func(t *testing.T) {
				forDraws(t, func(t *testing.T, typ window.Type, seed uint64) {
					r := adaptiveRun(t, sc, typ, seed, mutate)
					if m := r.LaterWindowsErrorPct.Median; m < -5 || m > 5 {
						t.Errorf("median window %+.1f%%, want within ±5%%", m)
					}
					for _, w := range r.Windows {
						if w.ErrorPct > 10 {
							t.Errorf("window at %.0fs %+.1f%%, want ≤ +10%%", w.StartS, w.ErrorPct)
						}
					}
				})
			})
		}
	}
}

func TestAdaptiveNeverRefusesDemandBelowLimit(t *testing.T) {
	splits := map[string]func(*Config){
		"even":     func(*Config) {},
		"skew:0.9": func(c *Config) { c.Skewed, c.Skew = true, 0.9 },
	}
	for name, split := range splits {
		for _, sc := range []scenario{perSecond, perTen} {
			t.Run(fmt.Sprintf("%s/%d per %v", name, sc.limit, sc.window), func(t *testing.T) {
				forDraws(t, func(t *testing.T, typ window.Type, seed uint64) {
					r := adaptiveRun(t, sc, typ, seed, func(c *Config) {
						split(c)
						c.Rate = 0.5 * float64(sc.limit) / sc.window.Seconds()
					})
					if r.RefusedTotal != 0 {
						t.Errorf("refused %d of %d requests at half the limit", r.RefusedTotal, r.DemandTotal)
					}
				})
			})
		}
	}
}
