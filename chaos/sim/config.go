package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// Arrivals is the shape of request arrival times.
type Arrivals uint8

const (
	// Uniform spaces requests exactly 1/rate apart.
	Uniform Arrivals = iota
	// Poisson draws exponential gaps with mean 1/rate.
	Poisson
)

// ParseArrivals reads "uniform" or "poisson".
func ParseArrivals(s string) (Arrivals, error) {
	switch s {
	case "uniform", "":
		return Uniform, nil
	case "poisson":
		return Poisson, nil
	}
	return 0, fmt.Errorf("arrivals must be uniform or poisson, got %q", s)
}

func (a Arrivals) String() string {
	if a == Poisson {
		return "poisson"
	}
	return "uniform"
}

// Config is one simulated scenario. The zero value of each field but Limit,
// Window, Sync and Duration has a meaning (see Defaults).
type Config struct {
	// Nodes is how many nodes share the rule.
	Nodes int
	// Rate is the total demand in requests per second.
	Rate float64
	// Skewed sends Skew of the requests to node 0 and spreads the rest
	// evenly; otherwise requests are split evenly, round-robin.
	Skewed bool
	Skew   float64
	// Shift, when > 0, moves all traffic from node 0 to node 1 at that time.
	Shift time.Duration
	// Arrivals is the arrival process.
	Arrivals Arrivals
	// Limit, Window, Type, Sync and Alloc make up the rule.
	Limit  int64
	Window time.Duration
	Type   window.Type
	Sync   time.Duration
	Alloc  window.Allocation
	// Latency is the one-way network delay between nodes.
	Latency time.Duration
	// BorrowTimeout is how long a check waits for its key's owner to
	// answer (owner allocation), as cluster.Config.BorrowTimeout; zero is
	// the cluster's default.
	BorrowTimeout time.Duration
	// Duration is how long the simulation runs.
	Duration time.Duration
	// Burst replaces the steady traffic: every node receives Limit requests
	// for a fresh key, spread over the first half sync interval, then
	// nothing.
	Burst bool
	// Seed seeds every random choice: sync phases and Poisson gaps.
	Seed uint64
	// Progress, if set, is called now and then with how much of Duration
	// has been simulated; it changes nothing of the run.
	Progress func(done, total time.Duration) `json:"-"`
}

// Defaults returns the published two-gateway scenario: 2 nodes, 800
// requests/s split evenly, 500 per 1 s sliding, 200 ms sync, 30 s.
func Defaults() Config {
	return Config{
		Nodes: 2, Rate: 800, Limit: 500, Window: time.Second, Type: window.Sliding,
		Sync: 200 * time.Millisecond, Alloc: window.Owner, Latency: time.Millisecond,
		Duration: 30 * time.Second, Seed: 1,
	}
}

// borrowTimeout is BorrowTimeout, or the cluster's default.
func (c *Config) borrowTimeout() time.Duration {
	if c.BorrowTimeout > 0 {
		return c.BorrowTimeout
	}
	return cluster.DefaultBorrowTimeout
}

// Rule returns the rule the scenario enforces.
func (c *Config) Rule() window.Rule {
	return window.Rule{Name: "sim", Count: c.Limit, Window: c.Window, Type: c.Type,
		SyncInterval: c.Sync, Allocation: c.Alloc}
}

// Validate names the first field that makes the scenario impossible for the
// simulator, which models batched rules only.
func (c *Config) Validate() error {
	if c.Sync == window.Strict {
		return errors.New("sync must be > 0: the simulator models batched rules")
	}
	return c.ValidateWallClock()
}

// ValidateWallClock is Validate for a run on a real cluster, where a strict
// rule (Sync == window.Strict) is a scenario too.
func (c *Config) ValidateWallClock() error {
	switch {
	case c.Nodes < 1 || c.Nodes > 1024:
		return fmt.Errorf("nodes must be in [1, 1024], got %d", c.Nodes)
	case c.Rate <= 0 || c.Rate > 1e7:
		return fmt.Errorf("rate must be in (0, 1e7] requests/s, got %g", c.Rate)
	case c.Skew < 0 || c.Skew > 1:
		return fmt.Errorf("split skew must be in [0, 1], got %g", c.Skew)
	case c.Shift < 0:
		return fmt.Errorf("shift must be ≥ 0, got %v", c.Shift)
	case c.Shift > 0 && c.Nodes < 2:
		return errors.New("shift needs at least 2 nodes")
	case c.Latency < 0:
		return fmt.Errorf("latency must be ≥ 0, got %v", c.Latency)
	case c.BorrowTimeout < 0:
		return fmt.Errorf("borrow timeout must be ≥ 0, got %v", c.BorrowTimeout)
	case c.Duration <= 0 || c.Duration > 24*time.Hour:
		return fmt.Errorf("duration must be in (0, 24h], got %v", c.Duration)
	}
	r := c.Rule()
	if err := r.Validate(); err != nil {
		return err
	}
	return nil
}

// ParseSplit reads "even" or "skew:P" (P in [0, 1], the share of node 0).
func ParseSplit(s string) (skewed bool, skew float64, err error) {
	if s == "even" || s == "" {
		return false, 0, nil
	}
	p, ok := strings.CutPrefix(s, "skew:")
	if !ok {
		return false, 0, fmt.Errorf("split must be even or skew:P, got %q", s)
	}
	v, err := strconv.ParseFloat(p, 64)
	if err != nil || v < 0 || v > 1 {
		return false, 0, fmt.Errorf("split skew:P needs P in [0, 1], got %q", p)
	}
	return true, v, nil
}
