package faults

import (
	"context"
	"fmt"
	"github.com/sluicehq/sluice/cluster"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestWholeFleetRestart kills every node of a fleet with data directories
// mid-window, as a power loss would, and starts them all again, one after
// the other, each on its last gRPC and gossip addresses.
//
// Batched: every node restores what it knew from its disk, so the window
// does not reset: the window's total stays ≤ count + 5 %, and every view of
// the ledger ends in [admitted − the last two persist intervals of every
// node, admitted].
//
// Strict: the group comes back (every node answers by the log within 30 s
// of the last restart) and the log kept every admission it committed: the
// s-ledger count lies between the admitted strict decisions and those plus
// the checks that may have been applied.
func TestWholeFleetRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3-node fleets for ~20 s")
	}
	t.Run("batched", func(t *testing.T) {
		t.Parallel()
		wholeFleetBatched(t)
	})
	t.Run("strict", func(t *testing.T) {
		t.Parallel()
		wholeFleetStrict(t)
	})
}

// killAll kills every running node and returns each one's incarnation and
// when it died.
func killAll(t *testing.T, f *Fleet) []kill {
	t.Helper()
	var kills []kill
	for _, name := range f.Up() {
		k := kill{node: name, boot: bootOf(f, name), at: f.Net.Now()}
		if err := f.Kill(name); err != nil {
			t.Fatal(err)
		}
		kills = append(kills, k)
	}
	return kills
}

// restartAll restarts every node that is down, in order, and returns how
// long that took.
func restartAll(t *testing.T, f *Fleet) time.Duration {
	t.Helper()
	start := f.Net.Now()
	for _, name := range f.Names() {
		if f.Node(name) == nil {
			if err := f.Restart(context.Background(), name); err != nil {
				t.Fatal(err)
			}
		}
	}
	return time.Duration(f.Net.Now() - start)
}

func wholeFleetBatched(t *testing.T) {
	seed := seedFor(t)
	const (
		count   = 300
		w       = 30 * time.Second
		sync    = 100 * time.Millisecond
		persist = 250 * time.Millisecond
		rate    = 300.0
	)
	slack := int64(count * 5 / 100)
	f := startFleet(t, Options{Nodes: 3, Rules: batchedRules(count, w, sync, window.Fixed), Seed: seed,
		DataDir: t.TempDir(), PersistInterval: persist, JoinTimeout: 2 * time.Second})
	start := f.Net.AlignNext(w, 200*time.Millisecond)
	hold(time.Duration(start - f.Net.Now()))
	load := f.Drive(Traffic{Rate: rate, Workers: 2, Pick: pickBatched, Seed: seed})
	hold(1500 * time.Millisecond)
	kills := killAll(t, f)
	restartedIn := restartAll(t, f)
	if err := f.WaitFormed(context.Background(), 60*time.Second, f.Names()); err != nil {
		load.Stop()
		t.Fatal(err)
	}
	hold(time.Second)
	recs := load.Stop()
	// A check waiting on its key's owner when its node is killed ends
	// with ErrClosed, unadmitted, as a request to a crashed process fails.
	if bad := errorsOf(recs, cluster.ErrClosed); len(bad) > 0 {
		t.Fatalf("%d checks failed; first: %s: %v", len(bad), bad[0].Node, bad[0].Err)
	}

	tally := Count(recs, "api", w, DecidedAt, nil)
	idx := window.Index(start, w)
	all := tally.Sum(idx)
	if all > count+slack {
		t.Errorf("the fleet admitted %d in the window across the restart of every node: bound %d; the window reset", all, count+slack)
	}
	want := admittedPerKey(recs, "ledger")
	lost := map[string]int64{}
	for _, k := range kills {
		for key, n := range lostAtMost(recs, "ledger", k.node, k.boot, k.at-2*int64(persist)) {
			lost[key] += n
		}
	}
	var wantTotal, lostTotal int64
	for key, n := range want {
		wantTotal += n
		lostTotal += lost[key]
	}
	t.Logf("api, count %d per %v: window admitted %d across the restart of all 3 nodes (restarts took %s); ledger admitted %d, crash allowance %d",
		count, w, all, secs(restartedIn), wantTotal, lostTotal)
	var diff string
	if !waitUntilOr(20*time.Second, func() bool { diff = viewsWithin(f, "ledger", want, lost); return diff == "" }) {
		t.Fatalf("views did not settle within 20 s of the traffic's end: %s\n%s", diff, describeViews(f, recs, "ledger"))
	}
}

func wholeFleetStrict(t *testing.T) {
	seed := seedFor(t)
	rules := []window.Rule{
		{Name: "s-ledger", Count: window.MaxCount, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed},
	}
	f := startFleet(t, Options{Nodes: 3, Rules: rules, Seed: seed, DataDir: t.TempDir(), JoinTimeout: 2 * time.Second})
	strictLeader(t, f, f.Names(), 30*time.Second)
	pick := func(rng *rand.Rand) (string, string) { return "s-ledger", fmt.Sprintf("k%d", rng.IntN(2)) }
	load := f.Drive(Traffic{Rate: 40, Workers: 4, Pick: pick, Timeout: time.Second, Seed: seed})
	hold(1500 * time.Millisecond)
	killAll(t, f)
	restartedIn := restartAll(t, f)
	restartedAt := f.Net.Now()
	var failed string
	up := waitUntilOr(30*time.Second, func() bool {
		for _, name := range f.Names() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			d, err := f.Node(name).Allow(ctx, "s-ledger", "probe", 0)
			cancel()
			if err != nil || d.Path != window.PathStrict {
				failed = fmt.Sprintf("%s answers by %v, %v", name, d.Path, err)
				return false
			}
		}
		return true
	})
	if !up {
		load.Stop()
		t.Fatalf("the strict group did not come back within 30 s of restarting every voter (%s; restarts took %s)",
			failed, secs(restartedIn))
	}
	backIn := time.Duration(f.Net.Now() - restartedAt)
	hold(time.Second)
	recs := load.Stop()
	final := append(peek(f, "s-ledger", "k0"), peek(f, "s-ledger", "k1")...)
	horizon := f.Net.Now()
	tm := checkStrictAnswers(t, rules, recs)
	checkLedger(t, rules[0], recs, final)
	checkLinear(t, rules, append(recs, final...), horizon)
	t.Logf("restarted all 3 voters in %s; the log answered again %s later; %d checks; %v", secs(restartedIn), secs(backIn), len(recs), tm)
}
