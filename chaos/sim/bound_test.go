package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// With N balanced nodes at r requests/s each and sync s, classic fixed
// windows overshoot by about (N − 1) × r × s: after its last sync before the
// budget runs out, each node spends the whole remainder alone while every
// other node spends one more interval's demand.
func TestClassicOvershootBound(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		for _, r := range []float64{200, 400, 1000} {
			for _, s := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond} {
				t.Run(fmt.Sprintf("N=%d r=%g s=%v", n, r, s), func(t *testing.T) {
					c := Defaults()
					c.Alloc, c.Type, c.Nodes, c.Rate, c.Sync = window.Classic, window.Fixed, n, r*float64(n), s
					c.Limit, c.Window, c.Duration = 2000, 10*time.Second, 60*time.Second
					res, err := Run(c)
					if err != nil {
						t.Fatal(err)
					}
					bound := float64(n-1) * r * s.Seconds()
					for i, w := range res.Windows[1:] {
						over := float64(w.Admitted - c.Limit)
						if over < 0.75*bound || over > 1.25*bound {
							t.Errorf("window %d overshoot %.0f, want within 25 %% of (N−1)×r×s = %.0f", i+1, over, bound)
						}
					}
				})
			}
		}
	}
}
