package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// randomRules mix batched and strict: api is limited per 1 s window, ledger
// never refuses, s-local is strict and falls back to local enforcement,
// s-ledger is strict, fails closed and never refuses.
func randomRules() []window.Rule {
	return []window.Rule{
		{Name: "api", Count: 100, Window: time.Second, Type: window.Sliding, SyncInterval: 100 * time.Millisecond},
		{Name: "ledger", Count: window.MaxCount, Window: time.Hour, Type: window.Fixed, SyncInterval: 100 * time.Millisecond},
		{Name: "s-local", Count: 40, Window: 2 * time.Second, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailLocal},
		{Name: "s-ledger", Count: window.MaxCount, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed},
	}
}

// pickRandom chooses the randomized scenario's checks. The strict rules'
// keys change every slice of the run (slice() says which): a check answered
// by fail mode may yet reach the log at any later time, so every such
// answer stays open in the linearizability check; fresh keys keep each
// key's history, and the number of open checks in it, short.
func pickRandom(slice func() int64) func(*rand.Rand) (string, string) {
	return func(rng *rand.Rand) (string, string) {
		switch p := rng.IntN(10); {
		case p < 4:
			return "api", "user:1"
		case p < 7:
			return "ledger", fmt.Sprintf("k%d", rng.IntN(4))
		case p < 9:
			return "s-local", fmt.Sprintf("k%d", slice())
		default:
			return "s-ledger", fmt.Sprintf("k%d-%d", slice(), rng.IntN(2))
		}
	}
}

// netState is the switchboard's faults from at on: the partition (nil:
// none) and whether any link is lossy or slow.
type netState struct {
	at     int64
	groups [][]string
	lossy  bool
}

// timeline is the states a run went through.
type timeline []netState

// groupsDuring returns how many distinct groups of nodes were cut off from
// each other at any time in [from, to], and whether links were lossy.
func (tl timeline) groupsDuring(names []string, from, to int64) (int, bool) {
	seen := map[string]bool{}
	lossy := false
	for i, s := range tl {
		end := int64(1<<63 - 1)
		if i+1 < len(tl) {
			end = tl[i+1].at
		}
		if end < from || s.at > to {
			continue
		}
		lossy = lossy || s.lossy
		groups := s.groups
		if groups == nil {
			groups = [][]string{names}
		}
		for _, g := range groups {
			g = slices.Clone(g)
			slices.Sort(g)
			seen[strings.Join(g, ",")] = true
		}
	}
	return len(seen), lossy
}

// withoutKilled returns recs less the checks that were in flight on an
// incarnation when the run killed it: those end with ErrClosed, as a
// caller of a node that is closing under it is told.
func withoutKilled(recs []Record, kills []kill) []Record {
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		cut := false
		if errors.Is(r.Err, cluster.ErrClosed) {
			for _, k := range kills {
				cut = cut || k.node == r.Node && k.boot == r.Boot && r.Call <= k.at
			}
		}
		if !cut {
			out = append(out, r)
		}
	}
	return out
}

// kill is a crash of the run: which incarnation, when.
type kill struct {
	node string
	boot uint64
	at   int64
}

// TestRandomized runs a seeded schedule of partitions, heals, kills,
// restarts, loss and delay over traffic on batched and strict rules, every
// node with a data directory, and checks at every step, for the windows
// closed since the last:
//
//   - every answer is a decision or an unknown strict outcome; batched
//     decisions are local, strict ones come by the log or the rule's fail
//     mode, and fail-mode answers come within the caller's deadline;
//   - no incarnation admits more than api's count (+ 10 %) in a window, and
//     no node over its runs more than that plus what its crashes may have
//     lost (two persist intervals of admissions);
//   - the fleet admits at most G × count + slack in a window, where G is
//     the number of distinct groups the partitions in force from 10 s
//     before the window to its end made (capped at the node count; 10 s
//     covers the fleet re-forming after a heal), slack is 10 % of count
//     plus the lossy-link widening of TestLossyLinks when links were lossy.
//
// At the end it heals everything, restarts the nodes that are down, waits
// for the fleet to re-form and the views to settle, and checks: every
// node's view of every ledger key lies in [admitted − crash allowance,
// admitted]; the strict group answers by the log again (within 30 s); the
// strict history is linearizable; the log's s-ledger counts lie between
// the admitted strict decisions and those plus the checks that may have
// been applied.
//
// The default run schedules faults for 15 s. -chaos.long (or CHAOS_LONG=1)
// runs 10 minutes.
func TestRandomized(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node fleet under random faults")
	}
	t.Parallel()
	seed := seedFor(t)
	duration := 15 * time.Second
	if isLong() {
		duration = 10 * time.Minute
	}
	const (
		count   = 100
		w       = time.Second
		persist = 250 * time.Millisecond
		rate    = 120.0
		lag     = 10 * time.Second
	)
	apiRate := rate * 0.4
	slack := int64(count / 10)
	lossySlack := slack + int64(2*apiRate*(100*time.Millisecond+300*time.Millisecond).Seconds())
	rules := randomRules()
	f := startFleet(t, Options{Nodes: 3, Rules: rules, Seed: seed, DataDir: t.TempDir(),
		PersistInterval: persist, JoinTimeout: 2 * time.Second})
	names := f.Names()
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	tl := timeline{{at: f.Net.Now()}}
	var kills []kill
	setState := func(groups [][]string, lossy bool) {
		tl = append(tl, netState{at: f.Net.Now(), groups: groups, lossy: lossy})
	}

	start := f.Net.Now()
	slice := func() int64 { return (f.Net.Now() - start) / int64(4*time.Second) }
	load := f.Drive(Traffic{Rate: rate, Workers: 3, Pick: pickRandom(slice), Timeout: time.Second, Seed: seed})
	ctx := context.Background()
	checkedTo := window.Index(start, w) - 1
	steps := 0
	check := func(final bool) {
		recs := load.Records()
		upTo := window.Index(f.Net.Now(), w) - 2 // windows whose checks have all returned
		if final {
			upTo = window.Index(f.Net.Now(), w)
		}
		checkRandomWindows(t, f, recs, tl, kills, checkedTo, upTo, count, w, persist, lag, slack, lossySlack)
		checkedTo = max(checkedTo, upTo)
		if bad := errorsOf(withoutKilled(recs, kills), cluster.ErrOutcomeUnknown); len(bad) > 0 {
			t.Fatalf("step %d: %d checks failed; first: %s %s: %v", steps, len(bad), bad[0].Node, bad[0].Rule, bad[0].Err)
		}
	}

	lastReport := start
	for time.Duration(f.Net.Now()-start) < duration {
		hold(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		steps++
		if now := f.Net.Now(); time.Duration(now-lastReport) >= 30*time.Second {
			lastReport = now
			t.Logf("%s: step %d, %d kills, %d checks so far", secs(time.Duration(now-start)), steps, len(kills), len(load.Records()))
		}
		up := f.Up()
		last := tl[len(tl)-1]
		switch p := rng.IntN(100); {
		case p < 25:
			// A random split into two non-empty groups.
			perm := rng.Perm(len(names))
			cut := 1 + rng.IntN(len(names)-1)
			var a, b []string
			for i, j := range perm {
				if i < cut {
					a = append(a, names[j])
				} else {
					b = append(b, names[j])
				}
			}
			f.Partition(a, b)
			setState([][]string{a, b}, last.lossy)
		case p < 45:
			f.Heal()
			setState(nil, false)
		case p < 60 && len(up) == len(names):
			victim := up[rng.IntN(len(up))]
			kills = append(kills, kill{node: victim, boot: bootOf(f, victim), at: f.Net.Now()})
			if err := f.Kill(victim); err != nil {
				t.Fatal(err)
			}
		case p < 80 && len(up) < len(names):
			for _, name := range names {
				if f.Node(name) == nil {
					if err := f.Restart(ctx, name); err != nil {
						t.Fatalf("step %d: %v", steps, err)
					}
				}
			}
		case p < 90:
			a, b := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
			if a == b {
				continue
			}
			loss := 0.05 + 0.25*rng.Float64()
			f.Mark(fmt.Sprintf("drop %s→%s %.0f%%", a, b, 100*loss))
			f.Net.Drop(a, b, loss)
			setState(last.groups, true)
		default:
			a, b := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
			if a == b {
				continue
			}
			d := time.Duration(5+rng.IntN(96)) * time.Millisecond
			f.Mark(fmt.Sprintf("delay %s→%s %v", a, b, d))
			f.Net.Delay(a, b, d)
			setState(last.groups, true)
		}
		check(false)
	}

	// Heal everything and bring every node back.
	f.Heal()
	setState(nil, false)
	for _, name := range names {
		if f.Node(name) == nil {
			if err := f.Restart(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	healAt := f.Net.Now()
	if err := f.WaitFormed(ctx, 60*time.Second, names); err != nil {
		load.Stop()
		t.Fatalf("after the final heal: %v", err)
	}
	reformed := time.Duration(f.Net.Now() - healAt)
	f.Mark("re-formed")
	hold(time.Second)
	recs := load.Stop()
	check(true)
	// The strict group must be back; then every node reads every
	// s-ledger key through the log.
	var final []Record
	var notBack string
	strictBack := waitUntilOr(30*time.Second, func() bool {
		for _, name := range names {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			d, err := f.Node(name).Allow(ctx, "s-ledger", "probe", 0)
			cancel()
			if err != nil || d.Path != window.PathStrict {
				notBack = fmt.Sprintf("%s answers by %v, %v", name, d.Path, err)
				return false
			}
		}
		return true
	})
	if strictBack {
		for key := range admittedPerKey(recs, "s-ledger") {
			final = append(final, peek(f, "s-ledger", key)...)
		}
	} else {
		t.Errorf("the strict group did not come back within 30 s of the final heal and restarts: %s", notBack)
	}
	horizon := f.Net.Now()

	tm := checkStrictAnswers(t, rules, withoutKilled(recs, kills))
	for _, r := range recs {
		if (r.Rule == "api" || r.Rule == "ledger") && r.Err == nil && r.D.Path != window.PathLocal {
			t.Fatalf("%s answered a batched check by path %v", r.Node, r.D.Path)
		}
	}

	// Every view of the ledger settles on what was admitted, less at most
	// what each crash may have lost.
	want := admittedPerKey(recs, "ledger")
	lost := map[string]int64{}
	for _, k := range kills {
		for key, n := range lostAtMost(recs, "ledger", k.node, k.boot, k.at-2*int64(persist)) {
			lost[key] += n
		}
	}
	var diff string
	if !waitUntilOr(30*time.Second, func() bool { diff = viewsWithin(f, "ledger", want, lost); return diff == "" }) {
		t.Errorf("ledger views did not settle within 30 s of the traffic's end: %s\n%s", diff, describeViews(f, recs, "ledger"))
	}
	if strictBack {
		checkLedger(t, rules[3], recs, final)
	}
	v := CheckLinearizable(rules, append(recs, final...), horizon, time.Minute)
	t.Logf("porcupine: %s over %d strict decisions and %d maybe-applied in %v", v.Result, v.Strict, v.Unknown, v.Took.Round(time.Millisecond))
	switch v.Result {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Logf("porcupine gave no verdict within its time limit")
	default:
		t.Errorf("the strict history is %s, want linearizable; visualization: %s", v.Result, v.Visualization)
		explainIllegal(t, rules, append(recs, final...), horizon)
	}

	paths := map[string]int{}
	for _, r := range recs {
		switch {
		case IsUnknown(r):
			paths["unknown"]++
		case r.Err == nil:
			paths[r.D.Path.String()]++
		}
	}
	st := f.Net.Stats()
	t.Logf("%d steps over %s (%d kills), %d checks (%d skipped, node down): %v; re-formed %s after the final heal; %v",
		steps, secs(duration), len(kills), len(recs), load.Skipped(), paths, secs(reformed), tm)
	t.Logf("switchboard: %d packets sent, %d cut, %d dropped; %d dials blocked; %d retransmits",
		st.PacketsSent.Load(), st.PacketsCut.Load(), st.PacketsDropped.Load(), st.DialsBlocked.Load(), st.Retransmits.Load())
	if t.Failed() {
		t.Logf("schedule:\n%s", FormatEvents(f.Events(), start))
	}
}

// checkRandomWindows checks api's windows (from, to] of the randomized
// scenario.
func checkRandomWindows(t *testing.T, f *Fleet, recs []Record, tl timeline, kills []kill,
	from, to int64, count int64, w, persist, lag time.Duration, slack, lossySlack int64) {
	t.Helper()
	if to <= from {
		return
	}
	names := f.Names()
	inWindows := func(r Record) bool {
		idx := window.Index(r.D.At, w)
		return idx > from && idx <= to
	}
	// Only these windows' api admissions matter: keep the work per step
	// proportional to the step, not to the run so far.
	var in []Record
	for _, r := range recs {
		if r.Rule == "api" && r.Admitted() && inWindows(r) {
			in = append(in, r)
		}
	}
	recs = in
	byInc := map[string]map[int64]int64{}
	tally := Count(recs, "api", w, DecidedAt, inWindows)
	for _, r := range recs {
		if r.Rule == "api" && r.Admitted() && inWindows(r) {
			inc := fmt.Sprintf("%s#%x", r.Node, r.Boot)
			if byInc[inc] == nil {
				byInc[inc] = map[int64]int64{}
			}
			byInc[inc][window.Index(r.D.At, w)] += r.Hits
		}
	}
	for inc, per := range byInc {
		for idx, n := range per {
			if n > count+slack {
				t.Errorf("%s admitted %d of api in window %d by itself, bound %d", inc, n, idx, count+slack)
			}
		}
	}
	for _, idx := range tally.Windows() {
		ws, we := window.Start(idx, w), window.Start(idx+1, w)
		for _, name := range names {
			// What the node's crashes in or just before the window may have
			// lost from its saved counts.
			var allowance int64
			for _, k := range kills {
				if k.node == name && k.at >= ws-int64(w) && k.at < we {
					allowance += sumWhere(recs, func(r Record) bool {
						return r.Rule == "api" && r.Node == name && r.Boot == k.boot && r.Admitted() &&
							r.D.At >= k.at-2*int64(persist) && window.Index(r.D.At, w) == idx
					})
				}
			}
			if n := tally.Sum(idx, name); n > count+slack+allowance {
				t.Errorf("%s admitted %d of api in window %d over its runs, bound %d (+%d its crashes may have lost)",
					name, n, idx, count+slack, allowance)
			}
		}
		groups, lossy := tl.groupsDuring(names, ws-int64(lag), we)
		groups = min(groups, len(names))
		s := slack
		if lossy {
			s = lossySlack
		}
		if all := tally.Sum(idx); all > int64(groups)*count+s {
			t.Errorf("the fleet admitted %d of api in window %d, bound %d (%d groups × %d + %d)",
				all, idx, int64(groups)*count+s, groups, count, s)
		}
	}
}

func sumWhere(recs []Record, keep func(Record) bool) int64 {
	var n int64
	for _, r := range recs {
		if keep(r) {
			n += r.Hits
		}
	}
	return n
}
