package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestQuietKeysAfterHeal has every node check ledger keys, cuts n1 off,
// spends the keys on the other side, heals, and sends nothing more. An
// owner tells a quiet key's counts once; at a heal its answer to a node
// back from the cut can go out before its own membership lists that node,
// and is lost. Every node's view must still come to what the fleet
// admitted, within 30 s of the fleet re-forming.
func TestQuietKeysAfterHeal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node fleet through a cut and a heal")
	}
	t.Parallel()
	const sync = 100 * time.Millisecond
	rules := []window.Rule{{Name: "ledger", Count: window.MaxCount, Window: time.Hour, Type: window.Fixed, SyncInterval: sync}}
	f := startFleet(t, Options{Nodes: 3, Rules: rules, Seed: seedFor(t)})
	ctx := context.Background()
	want := map[string]int64{}
	// Every node touches every key first: a node that never checked a key
	// has nothing of it for an owner to tell.
	spend := func(names []string, hits int) {
		for _, name := range names {
			for k := range 8 {
				key := fmt.Sprint("k", k)
				for range hits {
					d, err := f.Node(name).Allow(ctx, "ledger", key, 1)
					if err != nil || !d.Allowed {
						t.Fatalf("%s: ledger/%s: %+v, %v", name, key, d, err)
					}
					want[key]++
				}
			}
		}
	}
	spend(f.Names(), 1)
	if !waitUntilOr(30*time.Second, func() bool { return viewsWithin(f, "ledger", want, nil) == "" }) {
		t.Fatalf("views did not agree before the cut: %s", viewsWithin(f, "ledger", want, nil))
	}
	sideA, sideB := []string{"n0", "n2"}, []string{"n1"}
	f.Partition(sideA, sideB)
	for _, side := range [][]string{sideA, sideB} {
		if err := f.WaitFormed(ctx, 60*time.Second, side); err != nil {
			t.Fatalf("after the cut: %v", err)
		}
	}
	spend(sideA, 3)
	f.Mark("spent")
	f.Heal()
	if err := f.WaitFormed(ctx, 60*time.Second, f.Names()); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	f.Mark("re-formed")
	formed := f.Net.Now()
	var diff string
	if !waitUntilOr(30*time.Second, func() bool { diff = viewsWithin(f, "ledger", want, nil); return diff == "" }) {
		t.Fatalf("views did not agree within 30 s of the fleet re-forming: %s", diff)
	}
	t.Logf("views agreed %s after the fleet re-formed", secs(time.Duration(f.Net.Now()-formed)))
}
