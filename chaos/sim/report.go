package sim

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes the per-window table and an admitted-per-second chart
// against the per-second share of the limit.
func (r *Result) WriteText(w io.Writer, c *Config) error {
	var b strings.Builder
	fmt.Fprintf(&b, "sluice sim: %d nodes, %g req/s %s, %d per %v %s, sync %v, %s allocation, %v\n\n",
		c.Nodes, c.Rate, splitName(c), c.Limit, c.Window, c.Type, c.Sync, c.Alloc, c.Duration)
	fmt.Fprintf(&b, "%10s %10s %9s\n", "window", "admitted", "error")
	for _, win := range r.Windows {
		fmt.Fprintf(&b, "%9.1fs %10d %+8.1f%%\n", win.StartS, win.Admitted, win.ErrorPct)
	}
	fmt.Fprintf(&b, "\nfirst window %+.1f%%, later windows min %+.1f%% median %+.1f%% max %+.1f%%, cumulative %+.2f%%\n",
		r.FirstWindowErrorPct, r.LaterWindowsErrorPct.Min, r.LaterWindowsErrorPct.Median,
		r.LaterWindowsErrorPct.Max, r.CumulativeErrorPct)
	fmt.Fprintf(&b, "admitted %d of %d requests; %d deltas carrying %d entries", r.AdmittedTotal, r.DemandTotal, r.Deltas, r.Entries)
	// A run that did not encode its deltas (a real cluster's, read from its
	// metrics) has no byte count to show.
	if r.SyncBytes > 0 {
		fmt.Fprintf(&b, ", %d bytes encoded", r.SyncBytes)
	}
	b.WriteString("\n\n")
	r.writeChart(&b, c)
	_, err := io.WriteString(w, b.String())
	return err
}

func splitName(c *Config) string {
	s := "even"
	if c.Skewed {
		s = fmt.Sprintf("skew:%g", c.Skew)
	}
	if c.Shift > 0 {
		s += fmt.Sprintf(", shift at %v", c.Shift)
	}
	if c.Burst {
		s = "burst"
	}
	return s + " " + c.Arrivals.String()
}

const chartWidth = 50

// writeChart draws one bar per second; '|' marks the limit's per-second
// share (limit / window).
func (r *Result) writeChart(b *strings.Builder, c *Config) {
	perSecond := float64(c.Limit) / c.Window.Seconds()
	top := perSecond * 1.25
	for _, s := range r.Seconds {
		top = max(top, float64(s.Admitted))
	}
	mark := int(perSecond / top * chartWidth)
	fmt.Fprintf(b, "admitted per second ('|' = limit/window = %.0f/s)\n", perSecond)
	for _, s := range r.Seconds {
		n := int(float64(s.Admitted) / top * chartWidth)
		row := []rune(strings.Repeat("█", n) + strings.Repeat(" ", chartWidth-n))
		if mark < len(row) && row[mark] == ' ' {
			row[mark] = '|'
		}
		fmt.Fprintf(b, "%5.0fs %s %d\n", s.StartS, string(row), s.Admitted)
	}
}

// WriteSVG draws admitted per second, per node stacked, with the limit's
// per-second share as a line.
func (r *Result) WriteSVG(w io.Writer, c *Config) error {
	const width, height, left, bottom, top, right = 900.0, 360.0, 60.0, 40.0, 30.0, 20.0
	perSecond := float64(c.Limit) / c.Window.Seconds()
	maxY := perSecond * 1.25
	for _, s := range r.Seconds {
		maxY = max(maxY, float64(s.Admitted)*1.05)
	}
	n := len(r.Seconds)
	plotW, plotH := width-left-right, height-top-bottom
	x := func(i float64) float64 { return left + i/float64(max(n, 1))*plotW }
	y := func(v float64) float64 { return top + plotH - v/maxY*plotH }
	colors := []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">%d per %v %s, %d nodes, %g req/s, sync %v, %s: admitted per second</text>`+"\n",
		left, c.Limit, c.Window, c.Type, c.Nodes, c.Rate, c.Sync, c.Alloc)
	for i, s := range r.Seconds {
		base := 0.0
		for node, a := range s.PerNode {
			if a == 0 {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
				x(float64(i))+0.5, y(base+float64(a)), plotW/float64(n)-1, y(base)-y(base+float64(a)), colors[node%len(colors)])
			base += float64(a)
		}
	}
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="black" stroke-dasharray="6 4"/>`+"\n",
		left, y(perSecond), width-right, y(perSecond))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">limit/window %.0f</text>`+"\n", width-right, y(perSecond)-4, perSecond)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top+plotH, width-right, top+plotH)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, top+plotH)
	for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
		v := maxY * frac
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, y(v)+4, v)
	}
	step := max(1, n/10)
	for i := 0; i <= n; i += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%ds</text>`+"\n", x(float64(i)), height-bottom+16, i)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
