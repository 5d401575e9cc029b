package strict

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// runRules are the rules of the run property: a strict rule with three
// limits (a burst cap, a sliding minute and an hour), a strict rule of one
// limit, and a strict rule in shadow mode.
func runRules() []window.Rule {
	return window.AllParts([]window.Rule{
		{Name: "api", Count: 3, Window: time.Second, Type: window.Fixed, SyncInterval: window.Strict,
			Also: []window.Limit{{Count: 7, Window: time.Minute, Type: window.Sliding}, {Count: 12, Window: time.Hour, Type: window.Fixed}}},
		{Name: "pay", Count: 4, Window: 10 * time.Second, Type: window.Sliding, SyncInterval: window.Strict},
		{Name: "trial", Count: 2, Window: time.Second, Type: window.Fixed, SyncInterval: window.Strict, Shadow: true},
	})
}

// TestStrictRunIsAllOrNothing checks, over random log entries mixing
// single checks and runs joined by with_next (the limits of one rule, or
// several rules in one request, a key twice over), that the state machine
// admits a run exactly when each of its checks fits after those before it,
// counts every hit of an admitted run, and, when a run is refused, leaves
// every limit it named as it was: no limit of a refused check is consumed.
// A refusal under the rule in shadow mode refuses nothing else.
func TestStrictRunIsAllOrNothing(t *testing.T) {
	rules := runRules()
	byName := map[string]window.Rule{}
	var names []string
	for _, r := range rules {
		byName[r.Name] = r
		names = append(names, r.Name)
	}
	rapid.Check(t, func(rt *rapid.T) {
		f, err := newStrictFSM(rules)
		if err != nil {
			rt.Fatal(err)
		}
		now := int64(1_900_000_000) * int64(time.Second)
		id := uint64(0)
		for e := range rapid.IntRange(1, 30).Draw(rt, "entries") {
			now += rapid.Int64Range(0, int64(3*time.Second)).Draw(rt, fmt.Sprintf("advance%d", e))
			var checks []*sluicev1.StrictCheck
			var runs [][2]int // [start, end) of each run in checks
			for r := range rapid.IntRange(1, 4).Draw(rt, fmt.Sprintf("runs%d", e)) {
				start := len(checks)
				for c := range rapid.IntRange(1, 4).Draw(rt, fmt.Sprintf("len%d.%d", e, r)) {
					label := fmt.Sprintf("%d.%d.%d", e, r, c)
					id++
					checks = append(checks, &sluicev1.StrictCheck{Id: id,
						Rule: rapid.SampledFrom(names).Draw(rt, "rule"+label),
						Key:  rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key"+label),
						Hits: rapid.Int64Range(0, 2).Draw(rt, "hits"+label), WithNext: true})
				}
				checks[len(checks)-1].WithNext = false
				runs = append(runs, [2]int{start, len(checks)})
			}
			// What each run should do, worked out from the counts before
			// it with the window math alone.
			type key struct{ rule, key string }
			before := map[key]window.Counts{}
			for _, c := range checks {
				k := key{c.GetRule(), c.GetKey()}
				_, before[k] = f.replica.Table(k.rule).Counts(k.key, now)
			}
			d := f.ApplyBatch([]*raft.Log{{Type: raft.LogCommand, Data: mustMarshal(rt, &sluicev1.StrictBatch{Now: now, Checks: checks})}})
			res := d[0].(*strictResult)
			if res.err != nil || len(res.decisions) != len(checks) {
				rt.Fatalf("entry %d: %+v", e, res)
			}
			counts := before
			for _, run := range runs {
				// Checks decided in order, each after the earlier hits of
				// its run: the model of an exact limiter's all or nothing.
				spent := map[key]int64{}
				fits := true
				for _, c := range checks[run[0]:run[1]] {
					k := key{c.GetRule(), c.GetKey()}
					r := byName[k.rule]
					view := counts[k]
					view.Curr += spent[k]
					_, elapsed := window.Position(now, r.Window)
					if r.DecideAt(view, elapsed, c.GetHits()).Allowed {
						spent[k] += c.GetHits()
					} else if !r.Shadow {
						fits = false
						break
					}
				}
				admitted := true
				for i := run[0]; i < run[1]; i++ {
					sd := res.decisions[i]
					if sd.GetError() != "" {
						rt.Fatalf("entry %d, check %d: %s", e, i, sd.GetError())
					}
					if !sd.GetAllowed() && !byName[checks[i].GetRule()].Shadow {
						admitted = false
					}
				}
				if admitted != fits {
					rt.Fatalf("entry %d, run %v: admitted %v, the window math says %v; decisions %v",
						e, checks[run[0]:run[1]], admitted, fits, res.decisions[run[0]:run[1]])
				}
				if admitted {
					for k, n := range spent {
						c := counts[k]
						c.Curr += n
						counts[k] = c
					}
				}
			}
			for k, want := range counts {
				if got := f.counts(k.rule, k.key); got != want {
					rt.Fatalf("entry %d: %s/%s holds %+v, want %+v (a refused run's limits are never consumed)",
						e, k.rule, k.key, got, want)
				}
			}
		}
	})
}

func mustMarshal(t interface{ Fatal(...any) }, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
