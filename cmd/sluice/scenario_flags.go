package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/chaos/sim"
	"github.com/sluicehq/sluice/window"
)

// scenarioFlags are the flags `sluice sim` and `sluice bench accuracy` share;
// scripts depend on their names.
type scenarioFlags struct {
	nodes    int
	rate     float64
	split    string
	shift    time.Duration
	arrivals string
	limit    int64
	window   time.Duration
	sync     syncFlag
	typ      string
	alloc    string
	latency  time.Duration
	duration time.Duration
	burst    bool
	seed     uint64
	json     bool
}

func addScenarioFlags(fs *flag.FlagSet) *scenarioFlags {
	d := sim.Defaults()
	f := &scenarioFlags{}
	fs.IntVar(&f.nodes, "nodes", d.Nodes, "number of nodes")
	fs.Float64Var(&f.rate, "rate", d.Rate, "total demand in requests/s")
	fs.StringVar(&f.split, "split", "even", "how demand is split: even, or skew:P (P of it to node 0, the rest even)")
	fs.DurationVar(&f.shift, "shift", 0, "at this time move all traffic from node 0 to node 1 (0: never)")
	fs.StringVar(&f.arrivals, "arrivals", "uniform", "arrival process: uniform or poisson")
	fs.Int64Var(&f.limit, "limit", d.Limit, "requests allowed per window (the rule's count)")
	fs.DurationVar(&f.window, "window", d.Window, "window length")
	f.sync = syncFlag(d.Sync)
	fs.Var(&f.sync, "sync", "sync interval `DURATION`, such as 200ms; -1 makes the rule strict (bench only)")
	fs.StringVar(&f.typ, "type", d.Type.String(), "window type: fixed or sliding")
	fs.StringVar(&f.alloc, "alloc", d.Alloc.String(), "allocation policy: classic, adaptive or owner")
	fs.DurationVar(&f.latency, "latency", d.Latency, "one-way network latency between nodes")
	fs.DurationVar(&f.duration, "duration", d.Duration, "how long to run")
	fs.BoolVar(&f.burst, "burst", false, "a fresh key: every node gets limit requests over the first half sync interval, then nothing")
	fs.Uint64Var(&f.seed, "seed", d.Seed, "seed for sync phases and random arrivals")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of the table and chart")
	return f
}

// config turns the flags into a scenario for the simulator, naming the flag
// that is wrong.
func (f *scenarioFlags) config() (sim.Config, error) { return f.build(false) }

// wallClockConfig is config for a run on real nodes, where --sync -1 (strict)
// is allowed.
func (f *scenarioFlags) wallClockConfig() (sim.Config, error) { return f.build(true) }

func (f *scenarioFlags) build(wallClock bool) (sim.Config, error) {
	c := sim.Config{
		Nodes: f.nodes, Rate: f.rate, Shift: f.shift, Limit: f.limit, Window: f.window,
		Sync: time.Duration(f.sync), Latency: f.latency, Duration: f.duration, Burst: f.burst, Seed: f.seed,
	}
	var err error
	if c.Skewed, c.Skew, err = sim.ParseSplit(f.split); err != nil {
		return c, fmt.Errorf("--split: %w", err)
	}
	if c.Arrivals, err = sim.ParseArrivals(f.arrivals); err != nil {
		return c, fmt.Errorf("--arrivals: %w", err)
	}
	if c.Type, err = window.ParseType(f.typ); err != nil {
		return c, fmt.Errorf("--type: %w", err)
	}
	if c.Alloc, err = window.ParseAllocation(f.alloc); err != nil {
		return c, fmt.Errorf("--alloc: %w", err)
	}
	validate := c.Validate
	if wallClock {
		validate = c.ValidateWallClock
	}
	if err := validate(); err != nil {
		var fe *window.FieldError
		if errors.As(err, &fe) {
			return c, fmt.Errorf("--%s: %w", flagForField(fe.Field), err)
		}
		return c, err
	}
	return c, nil
}

// flagForField names the flag that sets a rule field.
func flagForField(field string) string {
	switch field {
	case "count":
		return "limit"
	case "time_window":
		return "window"
	case "sync_interval":
		return "sync"
	case "window_type":
		return "type"
	case "allocation":
		return "alloc"
	}
	return field
}

// syncFlag is a sync interval: a Go duration, or -1 for a strict rule.
type syncFlag time.Duration

func (s *syncFlag) String() string {
	if time.Duration(*s) == window.Strict {
		return "-1"
	}
	return time.Duration(*s).String()
}

func (s *syncFlag) Set(v string) error {
	if v == "-1" {
		*s = syncFlag(window.Strict)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want a duration such as 200ms, or -1 for strict: %w", err)
	}
	*s = syncFlag(d)
	return nil
}
