package sim

import (
	"fmt"
	"html"
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

// WriteSVG draws admitted per second, per node stacked, their total as a
// line, the limit's per-second share as a dashed line, and where each
// window starts as dotted ones.
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
	// The total, over the stacked nodes, and where each window starts.
	var pts strings.Builder
	for i, s := range r.Seconds {
		fmt.Fprintf(&pts, "%.1f,%.1f ", x(float64(i)+0.5), y(float64(s.Admitted)))
	}
	fmt.Fprintf(&b, `<polyline class="total" points="%s" fill="none" stroke="black" stroke-width="1.5"/>`+"\n", strings.TrimSpace(pts.String()))
	if ws := c.Window.Seconds(); ws > 0 {
		for t := 0.0; t <= float64(n); t += ws {
			fmt.Fprintf(&b, `<line class="window" x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#999" stroke-dasharray="2 3"/>`+"\n",
				x(t), top, x(t), top+plotH)
		}
	}
	fmt.Fprintf(&b, `<line class="limit" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="black" stroke-dasharray="6 4"/>`+"\n",
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

// WriteHTML writes a page a person can read the run from: the scenario,
// the summary, the chart WriteSVG draws and the per-window table. It needs
// nothing but a browser.
func (r *Result) WriteHTML(w io.Writer, c *Config) error {
	var chart strings.Builder
	if err := r.WriteSVG(&chart, c); err != nil {
		return err
	}
	esc := html.EscapeString
	title := fmt.Sprintf("sluice: %d nodes, %d per %v %s, %s allocation", c.Nodes, c.Limit, c.Window, c.Type, c.Alloc)
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>%s</title>\n", esc(title))
	b.WriteString("<style>body{font-family:sans-serif;margin:2em;max-width:960px}table{border-collapse:collapse}" +
		"td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd}th{text-align:left}</style>\n</head>\n<body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	b.WriteString("<h2>Scenario</h2>\n<table class=\"scenario\">\n")
	for _, kv := range [][2]string{
		{"nodes", fmt.Sprint(c.Nodes)},
		{"demand", fmt.Sprintf("%g requests/s, %s", c.Rate, splitName(c))},
		{"rule", fmt.Sprintf("%d per %v, %s window, sync every %v", c.Limit, c.Window, c.Type, c.Sync)},
		{"allocation", c.Alloc.String()},
		{"one-way latency", c.Latency.String()},
		{"duration", c.Duration.String()},
		{"seed", fmt.Sprint(c.Seed)},
	} {
		fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>\n", esc(kv[0]), esc(kv[1]))
	}
	b.WriteString("</table>\n<h2>Summary</h2>\n<table class=\"summary\">\n")
	for _, kv := range [][2]string{
		{"admitted", fmt.Sprintf("%d of %d requests", r.AdmittedTotal, r.DemandTotal)},
		{"first window", fmt.Sprintf("%+.1f %%", r.FirstWindowErrorPct)},
		{"later windows", fmt.Sprintf("min %+.1f %%, median %+.1f %%, max %+.1f %%",
			r.LaterWindowsErrorPct.Min, r.LaterWindowsErrorPct.Median, r.LaterWindowsErrorPct.Max)},
		{"cumulative", fmt.Sprintf("%+.2f %%", r.CumulativeErrorPct)},
		{"most in a window", fmt.Sprintf("%d (the count is %d)", r.MaxWindowAdmitted, c.Limit)},
		{"sync", fmt.Sprintf("%d deltas, %d entries, %d bytes", r.Deltas, r.Entries, r.SyncBytes)},
	} {
		fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>\n", esc(kv[0]), esc(kv[1]))
	}
	b.WriteString("</table>\n<h2>Admitted per second</h2>\n<p>Stacked by node; the black line is the total, " +
		"the dashed line the limit's share of a second, the dotted lines where windows start.</p>\n")
	b.WriteString(chart.String())
	b.WriteString("<h2>Windows</h2>\n<table class=\"windows\">\n<tr><th>start</th><th>admitted</th><th>error</th></tr>\n")
	for _, win := range r.Windows {
		fmt.Fprintf(&b, "<tr><td>%.1f s</td><td>%d</td><td>%+.1f %%</td></tr>\n", win.StartS, win.Admitted, win.ErrorPct)
	}
	b.WriteString("</table>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
