package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestRestartInsidePartition restarts a node while it is cut off from the
// rest of the fleet, so its start-up pull of the fleet's state fails, and
// checks that once the cut heals its views of keys it no longer serves
// catch up with what the others admitted meanwhile: a node that comes back
// without a pull must not keep, for the rest of the window, the view it
// saved before its crash.
//
// The restarted node takes no traffic after its restart, so nothing it
// reports makes the keys' owners answer it: its views can only come from
// fetching the fleet's state once its peers are reachable again.
func TestRestartInsidePartition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node fleet for ~10 s")
	}
	t.Parallel()
	seed := seedFor(t)
	const (
		sync    = 100 * time.Millisecond
		persist = 100 * time.Millisecond
		victim  = "n2"
	)
	rules := []window.Rule{{Name: "ledger", Count: window.MaxCount, Window: time.Hour, Type: window.Fixed, SyncInterval: sync}}
	f := startFleet(t, Options{Nodes: 3, Rules: rules, Seed: seed, DataDir: t.TempDir(),
		PersistInterval: persist, JoinTimeout: time.Second})
	pick := func(rng *rand.Rand) (string, string) { return "ledger", fmt.Sprintf("k%d", rng.IntN(4)) }
	others := []string{"n0", "n1"}

	load := f.Drive(Traffic{Rate: 100, Pick: pick, Seed: seed})
	hold(time.Second)
	recs := load.Stop()
	// Everything n2 admitted is synced and saved before the cut: what it
	// holds after the restart is then exact, and any shortfall in its
	// views at the end is what the others admitted while it was away.
	want := admittedPerKey(recs, "ledger")
	var diff string
	if !waitUntilOr(20*time.Second, func() bool { diff = viewsWithin(f, "ledger", want, nil); return diff == "" }) {
		t.Fatalf("views did not settle before the cut: %s", diff)
	}
	hold(3 * persist)

	f.Partition(others, []string{victim})
	if err := f.Kill(victim); err != nil {
		t.Fatal(err)
	}
	load = f.Drive(Traffic{Nodes: others, Rate: 100, Pick: pick, Seed: seed + 1})
	hold(time.Second)
	recs = append(recs, load.Stop()...)
	ctx := context.Background()
	if err := f.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	f.Heal()
	if err := f.WaitFormed(ctx, 60*time.Second, f.Names()); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	want = admittedPerKey(recs, "ledger")
	if !waitUntilOr(20*time.Second, func() bool { diff = viewsWithin(f, "ledger", want, nil); return diff == "" }) {
		t.Fatalf("views did not settle within 20 s of the heal: %s\n%s", diff, describeViews(f, recs, "ledger"))
	}
	if got := f.Node(victim).Metrics().LatePulls; got != 1 {
		t.Errorf("restarted %s made %d pulls after its start, want 1", victim, got)
	}
	t.Logf("views settled %v after the fleet re-formed", time.Since(healed).Round(time.Millisecond))
}
