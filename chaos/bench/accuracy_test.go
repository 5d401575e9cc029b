package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/chaos/sim"
	"github.com/sluicehq/sluice/window"
)

// testLogger keeps test output quiet unless SLUICE_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// smallScenario is two nodes, 600 req/s, 300 per 1 s fixed, for 3 s.
func smallScenario() sim.Config {
	c := sim.Defaults()
	c.Rate, c.Limit, c.Type, c.Duration = 600, 300, window.Fixed, 3*time.Second
	return c
}

// A short run on a real cluster admits about the limit in every window, sees
// every arrival the simulator sees, reports each second live, and encodes
// to JSON with every field the simulator's result has.
func TestAccuracySmallRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster for 3 s")
	}
	c := smallScenario()
	var live []sim.SecondStat
	res, err := Accuracy(context.Background(), c, Options{Logger: testLogger(), NodeLogger: testLogger(), Live: func(s sim.SecondStat) {
		live = append(live, s)
	}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if res.DemandTotal != want.DemandTotal {
		t.Errorf("demand %d, want the simulator's %d", res.DemandTotal, want.DemandTotal)
	}
	if len(res.Windows) != 3 {
		t.Fatalf("%d windows, want 3", len(res.Windows))
	}
	// Adaptive allocation aims at the limit; the slack covers a loaded
	// machine's scheduling. Anything past the classic bound, N × count, or
	// far under the limit is a broken run.
	classicBound := float64(c.Limit) + float64(c.Nodes-1)*c.Rate/float64(c.Nodes)*c.Sync.Seconds()
	for i, w := range res.Windows {
		t.Logf("window %d: admitted %d (%+.1f%%)", i, w.Admitted, w.ErrorPct)
		if float64(w.Admitted) > classicBound*1.05 || float64(w.Admitted) < float64(c.Limit)*0.9 {
			t.Errorf("window %d admitted %d, want within [%.0f, %.0f]", i, w.Admitted, float64(c.Limit)*0.9, classicBound*1.05)
		}
	}
	if res.Deltas == 0 || res.Entries == 0 {
		t.Errorf("sync traffic %d deltas, %d entries; want some", res.Deltas, res.Entries)
	}

	if len(live) != 3 {
		t.Fatalf("live called %d times, want 3 (once a second)", len(live))
	}
	for i, s := range live {
		if s.StartS != float64(i) || s.Admitted != res.Seconds[i].Admitted || !slices.Equal(s.PerNode, res.Seconds[i].PerNode) {
			t.Errorf("live second %d = %+v, want the result's %+v", i, s, res.Seconds[i])
		}
	}

	got, wantKeys := jsonKeys(t, res), jsonKeys(t, want)
	for _, k := range wantKeys {
		if !slices.Contains(got, k) {
			t.Errorf("bench JSON lacks the simulator's %q", k)
		}
	}
	if !slices.Equal(got, wantKeys) {
		t.Errorf("bench JSON keys %v, want the simulator's %v", got, wantKeys)
	}
}

// jsonKeys lists the keys of v's JSON encoding, nested ones as parent.child
// (arrays by their first element), sorted.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				keys = append(keys, prefix+k)
				walk(prefix+k+".", e)
			}
		case []any:
			if len(x) > 0 {
				walk(prefix, x[0])
			}
		}
	}
	walk("", m)
	slices.Sort(keys)
	return keys
}

// A run whose context ends early returns what it measured so far, in whole
// windows, with a StoppedError.
func TestAccuracyStoppedEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster for over a second")
	}
	c := smallScenario()
	c.Duration = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Accuracy(ctx, c, Options{Logger: testLogger(), NodeLogger: testLogger(), Live: func(s sim.SecondStat) {
		if s.StartS == 0 {
			cancel()
		}
	}})
	var stopped *StoppedError
	if !errors.As(err, &stopped) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a StoppedError wrapping context.Canceled", err)
	}
	if stopped.Measured != time.Second || res == nil || len(res.Windows) != 1 || len(res.Seconds) != 1 {
		t.Fatalf("measured %v, result %+v; want 1 s, one window, one second", stopped.Measured, res)
	}
	if res.Windows[0].Admitted < c.Limit*9/10 {
		t.Errorf("the measured window admitted %d, want about %d", res.Windows[0].Admitted, c.Limit)
	}
}

func TestAccuracyRejects(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*sim.Config)
		want  string
	}{
		{"no nodes", func(c *sim.Config) { c.Nodes = 0 }, "nodes must be in [1, 1024], got 0"},
		{"too many nodes", func(c *sim.Config) { c.Nodes = 65 }, "nodes must be in [1, 64] for an in-process cluster, got 65"},
		{"sync past window", func(c *sim.Config) { c.Sync = 2 * time.Second }, "sync_interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallScenario()
			tt.setup(&c)
			_, err := Accuracy(context.Background(), c, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestStartClusterRejectsSize(t *testing.T) {
	for _, n := range []int{0, MaxNodes + 1} {
		if _, err := StartCluster(context.Background(), n, nil, nil); err == nil {
			t.Errorf("StartCluster(%d nodes) succeeded", n)
		}
	}
}

// AlignNext moves the clock forward, by less than a window, to put a
// boundary lead from now.
func TestAlignNext(t *testing.T) {
	c := &Cluster{clock: newClock()}
	before := c.Now()
	b := c.AlignNext(time.Second, 100*time.Millisecond)
	if b%int64(time.Second) != 0 {
		t.Errorf("boundary %d is not on a second", b)
	}
	after := c.Now()
	if after < before || after-before > int64(time.Second+100*time.Millisecond) {
		t.Errorf("clock moved from %d to %d, want forward by less than a window and the lead", before, after)
	}
	if lead := b - after; lead <= 0 || lead > int64(100*time.Millisecond) {
		t.Errorf("boundary %v from now, want within the 100ms lead", time.Duration(lead))
	}
}

// A strict rule on a real cluster admits exactly the limit in every window.
func TestAccuracyStrictNeverOvershoots(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster for 3 s")
	}
	for _, typ := range []window.Type{window.Fixed, window.Sliding} {
		t.Run(typ.String(), func(t *testing.T) {
			c := smallScenario()
			c.Type, c.Sync = typ, window.Strict
			res, err := Accuracy(context.Background(), c, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range res.Windows {
				if w.Admitted > c.Limit {
					t.Errorf("window at %.0fs admitted %d, over the limit %d", w.StartS, w.Admitted, c.Limit)
				}
			}
			if res.MaxWindowAdmitted < c.Limit*9/10 {
				t.Errorf("most any window admitted is %d of %d: strict mode starves", res.MaxWindowAdmitted, c.Limit)
			}
		})
	}
}
