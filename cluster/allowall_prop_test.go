package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// propRules are the rules of the all-or-nothing property, batched or
// strict: a rule with three limits (a burst cap, a sliding minute, an
// hour), a sliding rule of one limit, and one in shadow mode.
func propRules(sync time.Duration) []window.Rule {
	return []window.Rule{
		{Name: "api", Count: 3, Window: time.Second, Type: window.Fixed, SyncInterval: sync,
			Also: []window.Limit{{Count: 7, Window: time.Minute, Type: window.Sliding}, {Count: 12, Window: time.Hour, Type: window.Fixed}}},
		{Name: "pay", Count: 4, Window: 10 * time.Second, Type: window.Sliding, SyncInterval: sync},
		{Name: "trial", Count: 2, Window: time.Second, Type: window.Fixed, SyncInterval: sync, Shadow: true},
	}
}

// TestAllOrNothingProperty checks, in batched and in strict mode, over
// random sequences of AllowAll calls and single checks of a rule with
// several limits (a rule twice over, a key twice over, checks of 0 hits),
// that no limit of a refused check is consumed: what every limit has left,
// for every key the call named, is what it had before. An admitted check
// consumes each of its limits, and a refusal under the rule in shadow
// mode admits and refuses nothing else.
func TestAllOrNothingProperty(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync time.Duration
	}{{"batched", 0}, {"strict", window.Strict}} {
		t.Run(mode.name, func(t *testing.T) {
			if mode.sync == window.Strict && testing.Short() {
				t.Skip("elects a strict leader")
			}
			clk := newFrozen(int64(1_900_000_000) * int64(time.Second))
			rules := propRules(mode.sync)
			cfg := Config{Name: "lone", Rules: rules, Logger: testLogger(t),
				Now: clk.Now, StrictTimeout: time.Minute}
			if mode.sync == window.Strict {
				cfg.Strict = strict.Mode{}
			}
			nd, err := Start(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer nd.Close()
			shadow := map[string]bool{"trial": true}
			parts := map[string][]string{}
			var names []string
			for _, r := range rules {
				names = append(names, r.Name)
				for _, p := range r.Parts() {
					parts[r.Name] = append(parts[r.Name], p.Name)
				}
			}
			ctx := context.Background()
			// used is what each limit of rule holds for key. A batched
			// node alone knows its counts exactly (View); of a strict
			// rule, a check of 0 hits, which spends nothing, says what
			// the log has left (for the rule's first limit, the least
			// any limit has: its name is the rule's).
			used := func(rt *rapid.T, rule, key string) []int64 {
				var out []int64
				for _, p := range parts[rule] {
					if mode.sync != window.Strict {
						_, view, err := nd.View(p, key)
						if err != nil {
							rt.Fatalf("view %s/%s: %v", p, key, err)
						}
						out = append(out, view.Curr)
						continue
					}
					d, err := nd.Allow(ctx, p, key, 0)
					if err != nil {
						rt.Fatalf("probe %s/%s: %v", p, key, err)
					}
					if d.Path != window.PathStrict {
						rt.Fatalf("probe %s/%s decided on path %v, not by the log", p, key, d.Path)
					}
					out = append(out, d.Limit-d.Remaining)
				}
				return out
			}
			if mode.sync == window.Strict {
				// The log decides once its leader has taken the node's
				// rules; before that a check is answered by its fail mode.
				deadline := time.Now().Add(30 * time.Second)
				for _, r := range rules {
					for _, p := range parts[r.Name] {
						for {
							d, err := nd.Allow(ctx, p, "warm-up", 0)
							if err == nil && d.Path == window.PathStrict {
								break
							}
							if time.Now().After(deadline) {
								t.Fatalf("%s is still not decided by the log after 30 s: %+v, %v", p, d, err)
							}
							time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
						}
					}
				}
			}
			example := 0
			rapid.Check(t, func(rt *rapid.T) {
				example++
				prefix := fmt.Sprintf("x%d-", example) // keys of their own
				for call := range rapid.IntRange(1, 12).Draw(rt, "calls") {
					clk.Advance(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(rt, fmt.Sprintf("advance%d", call))))
					var checks []Check
					for c := range rapid.IntRange(1, 3).Draw(rt, fmt.Sprintf("len%d", call)) {
						label := fmt.Sprintf("%d.%d", call, c)
						checks = append(checks, Check{
							Rule: rapid.SampledFrom(names).Draw(rt, "rule"+label),
							Key:  prefix + rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key"+label),
							Hits: rapid.Int64Range(0, 2).Draw(rt, "hits"+label)})
					}
					type rk struct{ rule, key string }
					before := map[rk][]int64{}
					for _, c := range checks {
						before[rk{c.Rule, c.Key}] = used(rt, c.Rule, c.Key)
					}
					var ok bool
					if len(checks) == 1 && rapid.Bool().Draw(rt, fmt.Sprintf("single%d", call)) {
						d, err := nd.Allow(ctx, checks[0].Rule, checks[0].Key, checks[0].Hits)
						if err != nil {
							rt.Fatal(err)
						}
						ok = d.Allowed
					} else {
						ds, all, err := nd.AllowAll(ctx, checks)
						if err != nil {
							rt.Fatal(err)
						}
						ok = all
						for i, d := range ds {
							if !d.Allowed && shadow[checks[i].Rule] {
								rt.Fatalf("check %d under the shadow rule refused: %+v", i, d)
							}
						}
					}
					for k, was := range before {
						now := used(rt, k.rule, k.key)
						for i := range was {
							switch {
							case !ok && now[i] != was[i]:
								rt.Fatalf("call %d refused, yet %s of %s/%s went from %d to %d used: a refused check consumed a limit (%+v)",
									call, parts[k.rule][i], k.rule, k.key, was[i], now[i], checks)
							case ok && now[i] < was[i]:
								rt.Fatalf("call %d admitted, and %s of %s/%s went down from %d to %d used (%+v)",
									call, parts[k.rule][i], k.rule, k.key, was[i], now[i], checks)
							}
						}
					}
					if ok {
						// Every limit of a check that spent hits holds them
						// (exactly, batched; strict, unless the limit had no
						// room to show it), unless the rule is in shadow
						// mode, whose refusals spend nothing.
						spent := map[rk]int64{}
						for _, c := range checks {
							spent[rk{c.Rule, c.Key}] += c.Hits
						}
						for k, n := range spent {
							if shadow[k.rule] {
								continue
							}
							now := used(rt, k.rule, k.key)
							for i := range now {
								grew := now[i] - before[k][i]
								if (mode.sync != window.Strict && grew != n) || (mode.sync == window.Strict && n > 0 && grew <= 0) {
									rt.Fatalf("call %d admitted %d hits of %s/%s, and %s went from %d to %d used (%+v)",
										call, n, k.rule, k.key, parts[k.rule][i], before[k][i], now[i], checks)
								}
							}
						}
					}
				}
			})
		})
	}
}
