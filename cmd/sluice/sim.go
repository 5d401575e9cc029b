package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/chaos/sim"
)

// runSim runs the deterministic simulator: `sluice sim [flags]`.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sluice sim [flags]\n\nSimulates N nodes sharing one batched rule in virtual time and reports what each window admitted.\nThe same flags give the same output, byte for byte.\n\nflags:")
		printFlags(fs)
	}
	f := addScenarioFlags(fs)
	svg := fs.String("svg", "", "also write an admitted-per-second chart to this SVG `FILE`")
	htmlFile := fs.String("html", "", "also write a report (the scenario, the summary, the chart and the window table) to this HTML `FILE`")
	table := fs.Bool("table", false, "print the table of the published scenarios under classic, adaptive and owner allocation (Markdown) and exit")
	draws := fs.Int("draws", 5, "with --table: sync-phase draws per cell (the cell is the median draw)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *table {
		return sim.WriteComparison(stdout, *draws)
	}
	c, err := f.config()
	if err != nil {
		return usageError{err}
	}
	var stop func()
	c.Progress, stop = simProgress(stderr, f.json)
	res, err := sim.Run(c)
	stop()
	if err != nil {
		return err
	}
	if *svg != "" {
		if err := writeReportFile("svg", *svg, func(w io.Writer) error { return res.WriteSVG(w, &c) }); err != nil {
			return err
		}
	}
	if *htmlFile != "" {
		if err := writeReportFile("html", *htmlFile, func(w io.Writer) error { return res.WriteHTML(w, &c) }); err != nil {
			return err
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		return enc.Encode(res)
	}
	return res.WriteText(stdout, &c)
}
