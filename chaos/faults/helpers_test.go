package faults

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/chaos/faultnet"
)

// longRun selects the long form of the randomized scenario; CHAOS_LONG=1
// does the same.
var longRun = flag.Bool("chaos.long", false, "run the randomized scenario for 10 minutes instead of its short form")

func isLong() bool { return *longRun || os.Getenv("CHAOS_LONG") == "1" }

// seedFor returns the scenario's seed: FAULTNET_SEED if set, else a fresh
// one. It is logged at once, and again with the command that replays it if
// the test fails.
func seedFor(t *testing.T) int64 {
	t.Helper()
	seed, replay, err := faultnet.SeedFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if replay {
		t.Logf("seed %d (from %s)", seed, faultnet.SeedEnv)
	} else {
		t.Logf("seed %d", seed)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with: %s=%d go test -race -run '^%s$' ./chaos/faults", faultnet.SeedEnv, seed,
				strings.ReplaceAll(t.Name(), "/", "$/^"))
		}
	})
	return seed
}

// nodeLogger returns where the nodes log: nowhere, unless CHAOS_LOG names a
// level (debug, info, warn, error), when they log to stderr.
func nodeLogger(t *testing.T) *slog.Logger {
	lv := os.Getenv("CHAOS_LOG")
	if lv == "" {
		return nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(lv)); err != nil {
		t.Fatalf("CHAOS_LOG=%q: %v", lv, err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// startFleet starts a fleet that the test closes.
func startFleet(t *testing.T, opts Options) *Fleet {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = nodeLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	start := f.Net.Now()
	t.Cleanup(func() {
		checkRejections(t, f)
		if t.Failed() {
			t.Logf("steps of the scenario (from the fleet's start):\n%s", FormatEvents(f.Events(), start))
		}
		if err := f.Close(); err != nil {
			t.Errorf("closing the fleet: %v", err)
		}
	})
	return f
}

// checkRejections checks that the running nodes refused no real node's
// counts as more than it could have admitted, whatever the faults: every
// delta of the fleet is real. The other refusals a real fleet sees (a
// sender gossip has yet to tell of, an incarnation a node was cut off
// from, a clock more than a window ahead) are logged.
func checkRejections(t *testing.T, f *Fleet) {
	t.Helper()
	for _, name := range f.Up() {
		nd := f.Node(name)
		if nd == nil {
			continue
		}
		m := nd.Metrics()
		if m.DeltasOverCount > 0 {
			t.Errorf("%s rejected %d deltas of real nodes as over what they could have admitted", name, m.DeltasOverCount)
		}
		if m.DeltasNotMember+m.DeltasUnknownInc+m.DeltasFutureWindow+m.DeltasRejected > 0 {
			t.Logf("%s rejected deltas: %d malformed, %d not from a member, %d naming incarnations it had not heard of, %d ahead",
				name, m.DeltasRejected, m.DeltasNotMember, m.DeltasUnknownInc, m.DeltasFutureWindow)
		}
	}
}

// hold lets the scenario run for d: traffic flows and faults take effect.
// It paces the scenario; nothing waits on it for a result.
func hold(d time.Duration) { time.Sleep(d) }

// waitUntil polls cond until it holds, or fails the test past within; it
// returns how long it took.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// secs formats a duration in seconds for the figures.
func secs(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }

// viewsWithin reports "" when every running node's whole view of each key
// of rule lies in [want − lost, want] (lost nil: exactly want), else the
// first that does not.
func viewsWithin(f *Fleet, rule string, want, lost map[string]int64) string {
	for _, name := range f.Up() {
		nd := f.Node(name)
		if nd == nil {
			continue
		}
		for key, w := range want {
			_, view, err := nd.View(rule, key)
			if err != nil {
				return err.Error()
			}
			if got := view.Prev + view.Curr; got < w-lost[key] || got > w {
				if lost[key] == 0 {
					return fmt.Sprintf("%s sees %d admitted for %s/%s, want %d", name, got, rule, key, w)
				}
				return fmt.Sprintf("%s sees %d admitted for %s/%s, want %d (at most %d lost to the crash)", name, got, rule, key, w, lost[key])
			}
		}
	}
	return ""
}

// admittedPerKey sums the admitted hits of rule per key among recs.
func admittedPerKey(recs []Record, rule string) map[string]int64 {
	out := map[string]int64{}
	for _, r := range recs {
		if r.Rule == rule && r.Admitted() {
			out[r.Key] += r.Hits
		}
	}
	return out
}
