package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/window"
)

// comparison is one scenario of the table of allocation policies.
type comparison struct {
	name      string
	published string
	setup     func(*Config)
	// measure summarises a run as text and a number to take medians of.
	measure func(*Result) (float64, string)
}

func medianWindow(r *Result) (float64, string) {
	m := r.LaterWindowsErrorPct.Median
	return m, fmt.Sprintf("%+.1f %% (%.0f)", m, r.MedianAdmitted())
}

func firstLaterCumulative(r *Result) (float64, string) {
	s := r.LaterWindowsErrorPct
	return r.CumulativeErrorPct, fmt.Sprintf("first %+.1f %%, later %+.1f…%+.1f %%, cumulative %+.1f %%",
		r.FirstWindowErrorPct, s.Min, s.Max, r.CumulativeErrorPct)
}

func laterRange(r *Result) (float64, string) {
	s := r.LaterWindowsErrorPct
	return s.Median, fmt.Sprintf("%+.1f…%+.1f %% (median %+.1f %%)", s.Min, s.Max, s.Median)
}

func burstWindow(r *Result) (float64, string) {
	a := float64(r.Windows[0].Admitted)
	return a, fmt.Sprintf("%.0f", a)
}

func scenarioSetup(limit int64, w time.Duration, typ window.Type, d time.Duration, more ...func(*Config)) func(*Config) {
	return func(c *Config) {
		c.Limit, c.Window, c.Type, c.Duration = limit, w, typ, d
		for _, m := range more {
			m(c)
		}
	}
}

func comparisons() []comparison {
	s, f := window.Sliding, window.Fixed
	sec, ten := time.Second, 10*time.Second
	eight := func(c *Config) { c.Nodes, c.Rate = 8, 4000 }
	skew := func(c *Config) { c.Skewed, c.Skew = true, 0.9 }
	shift := func(c *Config) { c.Shift = 10 * time.Second }
	burst := func(n int) func(*Config) {
		return func(c *Config) { c.Nodes, c.Burst, c.Duration = n, true, time.Second }
	}
	return []comparison{
		{"500 per 1 s fixed", "~579/s (+16 %)", scenarioSetup(500, sec, f, 30*sec), medianWindow},
		{"500 per 1 s sliding", "~445/s (−10 %)", scenarioSetup(500, sec, s, 30*sec), medianWindow},
		{"1000 per 10 s fixed", "1085–1087 (+8.5 %)", scenarioSetup(1000, ten, f, 90*sec), medianWindow},
		{"1000 per 10 s sliding", "first +8.2 %, later ±3.5 %, cumulative +0.2 %", scenarioSetup(1000, ten, s, 90*sec), firstLaterCumulative},
		{"fresh-window burst, 2 nodes, 500 per 1 s", "up to 2 × count", scenarioSetup(500, sec, s, sec, burst(2)), burstWindow},
		{"fresh-window burst, 8 nodes, 500 per 1 s", "up to 8 × count", scenarioSetup(500, sec, s, sec, burst(8)), burstWindow},
		{"fresh-window burst, 16 nodes, 500 per 1 s", "up to 16 × count", scenarioSetup(500, sec, s, sec, burst(16)), burstWindow},
		{"8 nodes, 4000 req/s, 500 per 1 s fixed", "", scenarioSetup(500, sec, f, 30*sec, eight), laterRange},
		{"8 nodes, 4000 req/s, 500 per 1 s sliding", "", scenarioSetup(500, sec, s, 30*sec, eight), laterRange},
		{"skew 0.9, 1000 per 10 s sliding", "", scenarioSetup(1000, ten, s, 90*sec, skew), laterRange},
		{"skew 0.9, 500 per 1 s fixed", "", scenarioSetup(500, sec, f, 30*sec, skew), laterRange},
		{"shift at 10 s, 1000 per 10 s fixed", "", scenarioSetup(1000, ten, f, 90*sec, shift), laterRange},
		{"shift at 10 s, 500 per 1 s sliding", "", scenarioSetup(500, sec, s, 30*sec, shift), laterRange},
	}
}

// WriteComparison runs the published scenarios and a few harder ones with
// classic, adaptive and owner allocation and writes a Markdown table of them beside
// the published figures. Each cell is the run whose summary figure is the
// median over draws sync-phase draws (seeds 1…draws).
func WriteComparison(w io.Writer, draws int) error {
	if draws < 1 {
		return fmt.Errorf("draws must be ≥ 1, got %d", draws)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Two nodes, 800 req/s split evenly, sync 200 ms, 1 ms latency unless the scenario says otherwise; "+
		"error against the limit per window; median over %d sync-phase draws.\n\n", draws)
	b.WriteString("| scenario | published (classic gateway) | sluice classic | sluice adaptive | sluice owner (default) |\n|---|---|---|---|---|\n")
	for _, cmp := range comparisons() {
		cells := [3]string{}
		for i, alloc := range []window.Allocation{window.Classic, window.Adaptive, window.Owner} {
			type run struct {
				v    float64
				text string
			}
			var runs []run
			for seed := uint64(1); seed <= uint64(draws); seed++ {
				c := Defaults()
				cmp.setup(&c)
				c.Alloc, c.Seed = alloc, seed
				r, err := Run(c)
				if err != nil {
					return fmt.Errorf("%s: %w", cmp.name, err)
				}
				v, text := cmp.measure(r)
				runs = append(runs, run{v, text})
			}
			slices.SortStableFunc(runs, func(a, b run) int {
				switch {
				case a.v < b.v:
					return -1
				case a.v > b.v:
					return 1
				}
				return 0
			})
			cells[i] = runs[(len(runs)-1)/2].text
		}
		pub := cmp.published
		if pub == "" {
			pub = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cmp.name, pub, cells[0], cells[1], cells[2])
	}
	_, err := io.WriteString(w, b.String())
	return err
}
