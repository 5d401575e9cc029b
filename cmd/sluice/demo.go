package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/chaos/bench"
	"github.com/sluicehq/sluice/chaos/sim"
	"github.com/sluicehq/sluice/window"
)

// demoPhase is one half of the demo: one allocation policy on its own
// cluster.
type demoPhase struct {
	alloc window.Allocation
	about string
	res   *sim.Result // nil until measured
	cfg   sim.Config
}

// runDemo runs N nodes in this process on loopback and charts what they
// admit, first with classic allocation, then with owner (the default).
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sluice demo [flags]\n\n"+
			"Starts N sluice nodes in this process (memberlist and gRPC over loopback) and sends them the\n"+
			"published gateway workload (800 req/s, 500 per 1s, sync 200ms), split evenly over the nodes:\n"+
			"first with classic allocation (what a gateway on a shared counter does), then with owner\n"+
			"allocation (sluice's default), each for half of --duration, each on a fresh cluster. Prints\n"+
			"what every node admits each second, then each window's error against the limit.\n"+
			"Ctrl-C stops early and reports what was measured.\n\nflags:")
		printFlags(fs)
	}
	d := sim.Defaults()
	dur := fs.Duration("duration", 20*time.Second, "total run time, split evenly between the two phases")
	nodes := fs.Int("nodes", 3, "number of nodes")
	rate := fs.Float64("rate", d.Rate, "total demand in requests/s, split evenly over the nodes")
	limit := fs.Int64("limit", d.Limit, "requests allowed per window (the rule's count)")
	win := fs.Duration("window", d.Window, "window length")
	syncEvery := fs.Duration("sync", d.Sync, "sync interval")
	typ := fs.String("type", window.Fixed.String(), "window type: fixed or sliding")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	base := d
	base.Nodes, base.Rate, base.Limit, base.Window, base.Sync = *nodes, *rate, *limit, *win, *syncEvery
	var err error
	if base.Type, err = window.ParseType(*typ); err != nil {
		return usageError{fmt.Errorf("--type: %w", err)}
	}
	if *dur <= 0 {
		return usageError{fmt.Errorf("--duration must be positive, got %v", *dur)}
	}
	// Each phase runs half the time, in whole windows.
	base.Duration = (*dur / 2).Truncate(max(base.Window, 1))
	if base.Duration <= 0 {
		return usageError{fmt.Errorf("--duration %v is too short: each phase needs at least one --window (%v)", *dur, base.Window)}
	}
	if base.Sync == window.Strict {
		return usageError{errors.New("--sync must be > 0: the demo compares the batched allocation policies")}
	}
	if err := base.Validate(); err != nil {
		var fe *window.FieldError
		if errors.As(err, &fe) {
			return usageError{fmt.Errorf("--%s: %w", flagForField(fe.Field), err)}
		}
		return usageError{err}
	}
	if base.Nodes > bench.MaxNodes {
		return usageError{fmt.Errorf("--nodes must be in [1, %d] for an in-process cluster, got %d", bench.MaxNodes, base.Nodes)}
	}

	phases := []*demoPhase{
		{alloc: window.Classic, about: "each node admits while its own view of the count has room, as a gateway on a shared counter does"},
		{alloc: window.Owner, about: "each key's owner grants every node its share and answers its reports at once (sluice's default)"},
	}
	fmt.Fprintf(stdout, "sluice demo: %d nodes in this process (memberlist + gRPC over loopback), %g req/s split evenly,\n"+
		"limit %d per %v %s, sync every %v. %v classic, then %v owner. Ctrl-C stops early.\n",
		base.Nodes, base.Rate, base.Limit, base.Window, base.Type, base.Sync, base.Duration, base.Duration)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var stoppedNote string
	for i, p := range phases {
		if ctx.Err() != nil {
			break
		}
		p.cfg = base
		p.cfg.Alloc = p.alloc
		fmt.Fprintf(stdout, "\n%s: %s\n", p.alloc, p.about)
		offset := time.Duration(i) * base.Duration
		res, err := bench.Accuracy(ctx, p.cfg, bench.Options{Logger: log, Live: func(s sim.SecondStat) {
			io.WriteString(stdout, liveLine(offset, p.alloc, s, &p.cfg))
		}})
		var stopped *bench.StoppedError
		switch {
		case errors.As(err, &stopped):
			stoppedNote = fmt.Sprintf("stopped early: %s measured for %v of %v", p.alloc, stopped.Measured, base.Duration)
			p.cfg.Duration = stopped.Measured
			p.res = res
		case err != nil:
			return fmt.Errorf("%s phase: %w", p.alloc, err)
		default:
			p.res = res
		}
	}
	writeDemoSummary(stdout, phases)
	if stoppedNote != "" {
		fmt.Fprintf(stdout, "\n%s\n", stoppedNote)
	}
	return nil
}

// Live bars: a node's share of the per-second limit is barShare cells; a bar
// is drawn to at most barMax cells and padded to it so the columns line up.
const (
	barShare = 6
	barMax   = 9
)

// bar draws v against share (barShare cells), to within an eighth of a cell.
func bar(v, share float64) string {
	// The partial blocks, one to seven eighths of a cell.
	eighths := [...]string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}
	e := 0
	if share > 0 {
		e = int(v/share*barShare*8 + 0.5)
	}
	e = min(max(e, 0), barMax*8)
	s := strings.Repeat("█", e/8) + eighths[e%8]
	cells := e / 8
	if e%8 != 0 {
		cells++
	}
	return s + strings.Repeat(" ", barMax-cells)
}

// liveLine is one second of the live chart: each node's admissions against
// its share of the per-second limit, and the total against the limit.
func liveLine(offset time.Duration, alloc window.Allocation, s sim.SecondStat, c *sim.Config) string {
	perSecond := float64(c.Limit) / c.Window.Seconds()
	var b strings.Builder
	fmt.Fprintf(&b, "%4.0fs %-8s ", offset.Seconds()+s.StartS, alloc)
	share := perSecond / float64(len(s.PerNode))
	for i, n := range s.PerNode {
		if len(s.PerNode) <= 6 {
			fmt.Fprintf(&b, " n%d %s %4d", i, bar(float64(n), share), n)
		} else {
			fmt.Fprintf(&b, " n%d %4d", i, n)
		}
	}
	limit := fmt.Sprintf("limit %d", c.Limit)
	if c.Window != time.Second {
		limit = fmt.Sprintf("limit/s %.0f", perSecond)
	}
	fmt.Fprintf(&b, "  | total %d / %s (%+.1f%%)\n", s.Admitted, limit, (float64(s.Admitted)-perSecond)/perSecond*100)
	return b.String()
}

// writeDemoSummary writes the phases' windows side by side and one summary
// line per phase.
func writeDemoSummary(w io.Writer, phases []*demoPhase) {
	var done []*demoPhase
	for _, p := range phases {
		if p.res != nil {
			done = append(done, p)
		}
	}
	if len(done) == 0 {
		fmt.Fprintln(w, "\nnothing measured")
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nadmitted per window of %v (limit %d)\n\n%8s", done[0].cfg.Window, done[0].cfg.Limit, "window")
	rows := 0
	for _, p := range done {
		fmt.Fprintf(&b, "  %17s %8s", p.alloc.String()+" admitted", "error")
		rows = max(rows, len(p.res.Windows))
	}
	b.WriteString("\n")
	for i := range rows {
		start := float64(i) * done[0].cfg.Window.Seconds()
		fmt.Fprintf(&b, "%7.1fs", start)
		for _, p := range done {
			if i < len(p.res.Windows) {
				win := p.res.Windows[i]
				fmt.Fprintf(&b, "  %17d %8s", win.Admitted, fmt.Sprintf("%+.1f%%", win.ErrorPct))
			} else {
				fmt.Fprintf(&b, "  %17s %8s", "", "")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\nerror against the limit, per window\n")
	for _, p := range done {
		r := p.res
		fmt.Fprintf(&b, "  %-8s median window %+6.1f%%, first window %+6.1f%%, cumulative %+6.1f%%  (%d windows, %d of %d requests admitted)\n",
			p.alloc, medianWindowError(r), r.FirstWindowErrorPct, r.CumulativeErrorPct, len(r.Windows), r.AdmittedTotal, r.DemandTotal)
	}
	io.WriteString(w, b.String())
}

// medianWindowError is the median of every whole window's error.
func medianWindowError(r *sim.Result) float64 {
	v := make([]float64, len(r.Windows))
	for i, w := range r.Windows {
		v[i] = w.ErrorPct
	}
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
