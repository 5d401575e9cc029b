package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
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

// patience bounds what a test waits for, however loaded the machine: a
// strict check waits this long for the log before its fail_mode answers.
const patience = time.Minute

// A short run on a real cluster admits about the limit in every window, sees
// every arrival the simulator sees, reports each second live, and encodes
// to JSON with every field the simulator's result has, and its own.
func TestAccuracySmallRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster for 3 s")
	}
	c := smallScenario()
	var live []sim.SecondStat
	res, err := MeasureAccuracy(context.Background(), c, Options{Logger: testLogger(), NodeLogger: testLogger(), Live: func(s sim.SecondStat) {
		live = append(live, s)
	}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("decided after the run's end: %+v; by path %v", res.DecidedAfterEnd, res.ByPath)
	if res.DemandTotal != want.DemandTotal {
		t.Errorf("demand %d, want the simulator's %d", res.DemandTotal, want.DemandTotal)
	}
	if res.ByPath[window.PathLocal.String()] != res.DemandTotal {
		t.Errorf("decisions by path %v, want all %d local", res.ByPath, res.DemandTotal)
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
	own := []string{"by_path", "decided_after_end", "decided_before_start"}
	for _, k := range got {
		if !slices.Contains(wantKeys, k) && !slices.ContainsFunc(own, func(p string) bool { return k == p || strings.HasPrefix(k, p+".") }) {
			t.Errorf("bench JSON has %q, neither the simulator's nor one of its own %v", k, own)
		}
	}
	for _, k := range []string{"decided_after_end.decided", "decided_after_end.admitted", "decided_after_end.furthest_s", "decided_before_start.decided"} {
		if !slices.Contains(got, k) {
			t.Errorf("bench JSON lacks %q", k)
		}
	}
}

// Every request that arrived in the run counts once: in the window and
// second of the moment it was decided, or, decided after the run's end or
// before its start, outside every window; requests that arrived after a
// stopped run's measured span not at all.
func TestTallyCountsEachDecisionWhereItWasMade(t *testing.T) {
	c := smallScenario() // 1 s windows, 3 s
	const s = int64(time.Second)
	start := 100 * s
	strict := func(arrived, at int64, allowed bool) decided {
		return decided{arrived: start + arrived, at: start + at, allowed: allowed, path: window.PathStrict}
	}
	w0 := &worker{log: []decided{
		strict(0, 0, true),
		strict(s/2, s/2, false),
		strict(3*s-1, 3*s-1, true),     // the run's last moment
		strict(3*s-2, 3*s, true),       // decided at the end: after it
		strict(2*s+s/2, 4*s+s/4, true), // a backlog well past the end
		strict(2*s+s/2, 4*s, false),
		strict(2*s-1, 2*s+s/4, true), // asked in window 1, decided in 2
	}}
	w1 := &worker{log: []decided{
		strict(s, s+1, true),
		strict(s, -s/2, true), // a deciding clock behind the bench's
		{arrived: start + s, at: start + s, allowed: false, path: window.PathFailLocal},
		strict(3*s, 3*s, true), // after the run: not one of its requests
	}}

	res := tally(&c, start, []*worker{w0, w1}).result()
	wantWindows := []int64{1, 1, 2}
	for i, w := range res.Windows {
		if w.Admitted != wantWindows[i] {
			t.Errorf("window %d admitted %d, want %d", i, w.Admitted, wantWindows[i])
		}
	}
	if got, want := res.Seconds[1].PerNode, []int64{0, 1}; !slices.Equal(got, want) {
		t.Errorf("second 1 per node %v, want %v", got, want)
	}
	if want := (OutsideRun{Decided: 3, Admitted: 2, FurthestS: 1.25}); res.DecidedAfterEnd != want {
		t.Errorf("decided after the end %+v, want %+v", res.DecidedAfterEnd, want)
	}
	if want := (OutsideRun{Decided: 1, Admitted: 1, FurthestS: 0.5}); res.DecidedBeforeStart != want {
		t.Errorf("decided before the start %+v, want %+v", res.DecidedBeforeStart, want)
	}
	if res.DemandTotal != 10 || res.AdmittedTotal != 7 || res.RefusedTotal != 3 {
		t.Errorf("totals: demand %d admitted %d refused %d, want 10, 7, 3", res.DemandTotal, res.AdmittedTotal, res.RefusedTotal)
	}
	if res.MaxWindowAdmitted != 2 {
		t.Errorf("most a window admitted is %d, want 2: nothing decided outside the run is in a window", res.MaxWindowAdmitted)
	}
	if want := map[string]int64{"strict": 9, "fail-local": 1}; !maps.Equal(res.ByPath, want) {
		t.Errorf("by path %v, want %v", res.ByPath, want)
	}

	// A run stopped after 2 s measures 2 windows: what arrived after them
	// is not counted, what arrived in them and was decided after is.
	c.Duration = 2 * time.Second
	res = tally(&c, start, []*worker{w0, w1}).result()
	if len(res.Windows) != 2 || res.Windows[0].Admitted != 1 || res.Windows[1].Admitted != 1 {
		t.Errorf("stopped run's windows %+v, want 2 that admitted 1 each", res.Windows)
	}
	if want := (OutsideRun{Decided: 1, Admitted: 1, FurthestS: 0.25}); res.DecidedAfterEnd != want {
		t.Errorf("stopped run: decided after the end %+v, want %+v", res.DecidedAfterEnd, want)
	}
	if want := map[string]int64{"strict": 5, "fail-local": 1}; !maps.Equal(res.ByPath, want) {
		t.Errorf("stopped run: by path %v, want %v", res.ByPath, want)
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
	res, err := MeasureAccuracy(ctx, c, Options{Logger: testLogger(), NodeLogger: testLogger(), Live: func(s sim.SecondStat) {
		if s.StartS == 0 {
			cancel()
		}
	}})
	var stopped *StoppedError
	if !errors.As(err, &stopped) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a StoppedError wrapping context.Canceled", err)
	}
	// The run stops after its first second; how soon after depends on the
	// machine, but what it measured is whole windows, at least the first.
	t.Logf("measured %v", stopped.Measured)
	windows := int(stopped.Measured / c.Window)
	if res == nil || stopped.Measured < c.Window || stopped.Measured%c.Window != 0 || stopped.Measured >= c.Duration ||
		len(res.Windows) != windows || len(res.Seconds) != int(stopped.Measured/time.Second) {
		t.Fatalf("measured %v, result %+v; want whole windows, one or more, a window and a second each", stopped.Measured, res)
	}
	for i, w := range res.Windows {
		if w.Admitted < c.Limit*9/10 {
			t.Errorf("measured window %d admitted %d, want about %d", i, w.Admitted, c.Limit)
		}
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
// boundary lead from the moment it read the clock.
func TestAlignNext(t *testing.T) {
	c := &Cluster{clock: newClock()}
	w, lead := time.Second, 100*time.Millisecond
	before, offset := c.Now(), c.clock.offset.Load()
	b := c.AlignNext(w, lead)
	after, shift := c.Now(), c.clock.offset.Load()-offset
	if b%int64(w) != 0 {
		t.Errorf("boundary %d is not on a second", b)
	}
	if shift < 0 || shift >= int64(w) {
		t.Errorf("clock shifted by %v, want forward by less than a window", time.Duration(shift))
	}
	// AlignNext read the clock between before and after: the boundary is
	// lead past that reading, shifted.
	if at := b - int64(lead); at < before+shift || at > after {
		t.Errorf("boundary %d is lead after %d, outside the call's [%d, %d] on the shifted clock", b, at, before+shift, after)
	}
}

// A strict rule on a real cluster never admits more than the limit in a
// window, counting each decision in the window the log made it in. Its
// checks may queue well past the run's end on a loaded machine; those are
// reported, not counted in the run's last window.
func TestAccuracyStrictNeverOvershoots(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster for 3 s")
	}
	for _, typ := range []window.Type{window.Fixed, window.Sliding} {
		t.Run(typ.String(), func(t *testing.T) {
			c := smallScenario()
			c.Type, c.Sync = typ, window.Strict
			// However slow the machine, every check waits for the log: the
			// run measures the log, not the fail mode.
			res, err := MeasureAccuracy(context.Background(), c, Options{Logger: testLogger(), NodeLogger: testLogger(), StrictTimeout: patience})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("windows %+v; decided after the run's end %+v, before its start %+v; outcome unknown %d",
				res.Windows, res.DecidedAfterEnd, res.DecidedBeforeStart, res.OutcomeUnknown)
			if strict := res.ByPath[window.PathStrict.String()]; strict+res.OutcomeUnknown != res.DemandTotal {
				t.Fatalf("%d of %d decisions through the log (by path %v, %d outcomes unknown), want all", strict, res.DemandTotal, res.ByPath, res.OutcomeUnknown)
			}
			for _, w := range res.Windows {
				if w.Admitted > c.Limit {
					t.Errorf("window at %.0fs admitted %d, over the limit %d", w.StartS, w.Admitted, c.Limit)
				}
			}
			// However the decisions fall in time, the first count of them
			// find the budget whole: a run that admits fewer has starved.
			// A check whose outcome is unknown may have taken budget.
			if want := min(res.DemandTotal, c.Limit); res.AdmittedTotal+res.OutcomeUnknown < want {
				t.Errorf("admitted %d of %d requests (%d outcomes unknown), want at least %d: strict mode starves",
					res.AdmittedTotal, res.DemandTotal, res.OutcomeUnknown, want)
			}
		})
	}
}
