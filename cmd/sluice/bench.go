package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/chaos/bench"
	"github.com/sluicehq/sluice/chaos/sim"
)

// benchCommand is one `sluice bench` subcommand.
type benchCommand struct {
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	summary string
}

// benchCommands returns the `sluice bench` subcommands by name.
func benchCommands() map[string]benchCommand {
	return map[string]benchCommand{
		"accuracy":   {runBenchAccuracy, "run a `sluice sim` scenario on a real in-process cluster in wall-clock time"},
		"flood":      {runBenchFlood, "send a running node N distinct keys and watch its memory through and after them"},
		"memory":     {runBenchMemory, "measure the heap per active key per node of N nodes' views, every node on every key"},
		"throughput": {runBenchThroughput, "measure decisions/s and per-call latency, batched or strict, embedded or over gRPC"},
	}
}

// runBench measures a real in-process cluster: `sluice bench accuracy …`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmds := benchCommands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(args) == 0 {
		return usageError{fmt.Errorf("missing subcommand; one of: %s", strings.Join(names, ", "))}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, "usage: sluice bench SUBCOMMAND [flags]\n\n"+
			"Measures sluice in this process: accuracy and throughput run N real nodes over loopback in wall-clock time;\nmemory sizes the counter tables of N nodes in virtual time.\n\nsubcommands:\n")
		for _, n := range names {
			fmt.Fprintf(stdout, "  %-11s %s\n", n, cmds[n].summary)
		}
		fmt.Fprint(stdout, "\nRun 'sluice bench SUBCOMMAND --help' for its flags.\n")
		return flag.ErrHelp
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		if s, ok := suggest(args[0], names); ok {
			return usageError{fmt.Errorf("unknown subcommand %q; did you mean %q?", args[0], s)}
		}
		return usageError{fmt.Errorf("unknown subcommand %q; one of: %s", args[0], strings.Join(names, ", "))}
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

// runBenchAccuracy is `sluice bench accuracy [sim flags]`: the simulator's
// scenario on a real cluster, reported as `sluice sim` reports it.
func runBenchAccuracy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench accuracy", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sluice bench accuracy [flags]\n\n"+
			"Runs the scenario `sluice sim` takes on N real nodes in this process (memberlist and gRPC over\n"+
			"loopback), in wall-clock time, and reports what each window admitted, as `sluice sim` does.\n"+
			"The run takes --duration. Loopback sets the latency: --latency is ignored. The nodes' sync\n"+
			"phases follow from when they started; --seed draws only Poisson arrivals.\n\nflags:")
		printFlags(fs)
	}
	f := addScenarioFlags(fs)
	svg := fs.String("svg", "", "also write an admitted-per-second chart to this SVG `FILE`")
	htmlFile := fs.String("html", "", "also write a report (the scenario, the summary, the chart and the window table) to this HTML `FILE`")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	c, err := f.wallClockConfig()
	if err != nil {
		return usageError{err}
	}
	if c.Nodes > bench.MaxNodes {
		return usageError{fmt.Errorf("--nodes must be in [1, %d] for an in-process cluster, got %d", bench.MaxNodes, c.Nodes)}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stop := showProgress(stderr, "bench accuracy", c.Duration, f.json)
	res, err := bench.MeasureAccuracy(ctx, c, bench.Options{Logger: log})
	stop()
	var stopped *bench.StoppedError
	if errors.As(err, &stopped) && res != nil {
		// Report what was measured before the interrupt, then fail.
		c.Duration = stopped.Measured
	} else if err != nil {
		return err
	}
	if werr := writeBenchResult(stdout, res, &c, *svg, *htmlFile, f.json); werr != nil {
		return werr
	}
	return err
}

// writeBenchResult writes res as `sluice sim` does: the SVG chart if asked
// for, then JSON or the table and chart, and then what only a real cluster
// has: the requests decided outside the run.
func writeBenchResult(stdout io.Writer, res *bench.AccuracyResult, c *sim.Config, svg, htmlFile string, asJSON bool) error {
	if svg != "" {
		if err := writeReportFile("svg", svg, func(w io.Writer) error { return res.WriteSVG(w, c) }); err != nil {
			return err
		}
	}
	if htmlFile != "" {
		if err := writeReportFile("html", htmlFile, func(w io.Writer) error { return res.WriteHTML(w, c) }); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	var b bytes.Buffer
	if err := res.WriteText(&b, c); err != nil {
		return err
	}
	// The table is the simulator's; its title names this command instead.
	text := b.String()
	if rest, ok := strings.CutPrefix(text, "sluice sim:"); ok {
		text = "sluice bench accuracy:" + rest
	}
	text += "\n" + outsideRunText(res)
	_, err := io.WriteString(stdout, text)
	return err
}

// outsideRunText says how many requests were decided after the run's end
// (and, if any, before its start): they count in no window of the table.
func outsideRunText(res *bench.AccuracyResult) string {
	line := func(o bench.OutsideRun, when, how string) string {
		if o.Decided == 0 {
			return fmt.Sprintf("decided %s: none of the %d requests\n", when, res.DemandTotal)
		}
		return fmt.Sprintf("decided %s: %d of the %d requests (%d admitted), the furthest %.3fs %s;"+
			" each counts in the window it was decided in, which the table does not show\n",
			when, o.Decided, res.DemandTotal, o.Admitted, o.FurthestS, how)
	}
	s := line(res.DecidedAfterEnd, "after the run's end", "after it")
	if res.DecidedBeforeStart.Decided > 0 {
		s += line(res.DecidedBeforeStart, "before the run's start", "before it")
	}
	// A strict rule's checks that failed over were not decided by the log.
	paths := make([]string, 0, len(res.ByPath))
	for _, p := range slices.Sorted(maps.Keys(res.ByPath)) {
		paths = append(paths, fmt.Sprintf("%s %d", p, res.ByPath[p]))
	}
	s += "decided by: " + strings.Join(paths, ", ") + "\n"
	if res.OutcomeUnknown > 0 {
		s += fmt.Sprintf("outcome unknown: %d strict checks (the log's leader changed under them; the log may have admitted them)\n", res.OutcomeUnknown)
	}
	return s
}
