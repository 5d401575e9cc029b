package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// Rules of the batched scenarios: api is limited and checked per window;
// ledger never refuses and its window outlasts a test, so every node's view
// of it must end up equal to everything the fleet admitted.
func batchedRules(count int64, w, sync time.Duration, typ window.Type) []window.Rule {
	return []window.Rule{
		{Name: "api", Count: count, Window: w, Type: typ, SyncInterval: sync},
		{Name: "ledger", Count: window.MaxCount, Window: time.Hour, Type: window.Fixed, SyncInterval: sync},
	}
}

// pickBatched sends half the checks to api's one hot key and half to four
// ledger keys.
func pickBatched(rng *rand.Rand) (string, string) {
	if rng.IntN(2) == 0 {
		return "api", "user:1"
	}
	return "ledger", fmt.Sprintf("k%d", rng.IntN(4))
}

// TestBatchedPartition splits a batched fleet {n0, n1} | {n2} for several
// windows with traffic on both sides, heals it, and checks:
//
//   - per window, each side admits at most count + slack, and the fleet at
//     most 2 × count + slack; windows before the cut, at most count + slack.
//     slack = 10 % of count plus the classic overshoot within the larger
//     side, (side nodes − 1) × rate × sync: a side that has not yet noticed
//     admits its share plus what it had claimed, one that has noticed up to
//     the count, and neither more;
//   - after the heal, the fleet re-forms, and every node's view of every
//     ledger key equals the sum of what the nodes admitted: nothing lost,
//     nothing counted twice; each node's own count equals what it admitted.
//     The fleet must re-form within 60 s of the heal and, once traffic
//     stops, the views agree within 30 s (generous deadlines; the design's
//     3 sync intervals plus the re-forming are the logged figures).
func TestBatchedPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node fleet for ~15 s")
	}
	t.Parallel()
	seed := seedFor(t)
	const (
		count  = 100
		w      = time.Second
		sync   = 100 * time.Millisecond
		rate   = 300.0 // checks per second per node, half of them on api
		cutFor = 8 * w
	)
	apiRate := rate / 2
	slack := int64(count/10 + apiRate*sync.Seconds()) // larger side: 2 nodes
	rules := batchedRules(count, w, sync, window.Sliding)
	f := startFleet(t, Options{Nodes: 3, Rules: rules, Seed: seed})
	hold(time.Duration(f.Net.AlignNext(w, 50*time.Millisecond) - f.Net.Now()))
	sideA, sideB := []string{"n0", "n1"}, []string{"n2"}

	load := f.Drive(Traffic{Rate: rate, Workers: 2, Pick: pickBatched, Seed: seed})
	hold(2 * w)
	cutAt := f.Net.Now()
	f.Partition(sideA, sideB)
	hold(cutFor)
	healAt := f.Net.Now()
	f.Heal()
	ctx := context.Background()
	if err := f.WaitFormed(ctx, 60*time.Second, f.Names()); err != nil {
		load.Stop()
		t.Fatalf("after the heal: %v", err)
	}
	rejoined := time.Duration(f.Net.Now() - healAt)
	f.Mark("re-formed")
	hold(w)
	recs := load.Stop()
	stopAt := f.Net.Now()
	f.Mark("traffic stopped")

	if bad := errorsOf(recs); len(bad) > 0 {
		t.Fatalf("%d checks failed; first: %s: %v", len(bad), bad[0].Node, bad[0].Err)
	}
	for _, r := range recs {
		if r.D.Path != window.PathLocal {
			t.Fatalf("%s answered a batched check by path %v", r.Node, r.D.Path)
		}
	}

	tally := Count(recs, "api", w, DecidedAt, nil)
	firstCut, lastCut := window.Index(cutAt, w), window.Index(healAt, w)
	var worstA, worstB, worstFleet, worstCalm int64
	for _, idx := range tally.Windows() {
		a, b, all := tally.Sum(idx, sideA...), tally.Sum(idx, sideB...), tally.Sum(idx)
		worstA, worstB, worstFleet = max(worstA, a), max(worstB, b), max(worstFleet, all)
		if a > count+slack || b > count+slack {
			t.Errorf("window %d: sides admitted %d and %d, bound %d each (count %d + slack %d)",
				idx-firstCut, a, b, count+slack, count, slack)
		}
		if all > 2*count+slack {
			t.Errorf("window %d: the fleet admitted %d, bound %d", idx-firstCut, all, 2*count+slack)
		}
		if idx < firstCut {
			worstCalm = max(worstCalm, all)
			if all > count+slack {
				t.Errorf("window %d, before the cut: the fleet admitted %d, bound %d", idx-firstCut, all, count+slack)
			}
		}
		if idx >= firstCut && idx <= lastCut {
			t.Logf("cut window %2d: {n0,n1} %3d  {n2} %3d  fleet %3d", idx-firstCut, a, b, all)
		}
	}
	t.Logf("api, count %d per %v: worst window before the cut %d; during it {n0,n1} %d (%+.0f%%), {n2} %d (%+.0f%%), fleet %d; bound per side %d",
		count, w, worstCalm, worstA, pct(worstA, count), worstB, pct(worstB, count), worstFleet, count+slack)

	want := admittedPerKey(recs, "ledger")
	var diff string
	converged := waitUntilOr(30*time.Second, func() bool { diff = viewsWithin(f, "ledger", want, nil); return diff == "" })
	if !converged {
		t.Fatalf("views did not agree within 30 s of the traffic's end: %s", diff)
	}
	convergedIn := time.Duration(f.Net.Now() - stopAt)
	for _, name := range f.Names() {
		mine := map[string]int64{}
		for _, r := range recs {
			if r.Rule == "ledger" && r.Node == name && r.Admitted() {
				mine[r.Key] += r.Hits
			}
		}
		for key, n := range mine {
			own, _, _ := f.Node(name).View("ledger", key)
			if own.Prev+own.Curr != n {
				t.Errorf("%s counts %d of its own for ledger/%s, but admitted %d", name, own.Prev+own.Curr, key, n)
			}
		}
	}
	var total int64
	for _, n := range want {
		total += n
	}
	t.Logf("heal: the fleet re-formed %s after it; with traffic stopped, views agreed in %s; ledger total %d over %d checks",
		secs(rejoined), secs(convergedIn), total, len(recs))
}

// waitUntilOr polls cond until it holds (true) or within passes (false).
func waitUntilOr(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// pct is n's difference from count, in percent.
func pct(n, count int64) float64 { return 100 * float64(n-count) / float64(count) }
