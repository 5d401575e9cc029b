package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// statsRules are a lone node's rules for the tests of its counts: a
// batched rule, one with two limits and one in shadow mode.
var statsRules = []window.Rule{
	{Name: "api", Count: 2, Window: time.Minute, Type: window.Fixed},
	{Name: "multi", Count: 5, Window: time.Minute, Type: window.Fixed,
		Also: []window.Limit{{Count: 2, Window: time.Hour, Type: window.Fixed}}},
	{Name: "dry", Count: 1, Window: time.Minute, Type: window.Fixed, Shadow: true},
}

// decisionsOf returns what n counted of rule, failing if it has no such
// rule.
func decisionsOf(t *testing.T, n *Node, rule string) Decisions {
	t.Helper()
	for _, st := range n.RuleStats() {
		if st.Rule.Name == rule {
			return st.Decisions
		}
	}
	t.Fatalf("RuleStats has no rule %q", rule)
	return Decisions{}
}

// TestRuleStatsCounts checks that each way of checking counts each check
// once, under its rule's name, by path and result.
func TestRuleStatsCounts(t *testing.T) {
	ctx := context.Background()
	local := window.PathLocal
	type count struct {
		rule   string
		result Result
		want   uint64
	}
	for _, tc := range []struct {
		name   string
		checks func(t *testing.T, n *Node)
		want   []count
	}{
		{"Allow: admitted, refused, an error", func(t *testing.T, n *Node) {
			for range 3 {
				n.Allow(ctx, "api", "k", 1)
			}
			n.Allow(ctx, "api", "k", 3) // over the count
		}, []count{{"api", ResultAllowed, 2}, {"api", ResultRefused, 1}, {"api", ResultError, 1}}},
		{"a Limiter's Allow and Reserve", func(t *testing.T, n *Node) {
			l, err := n.Limiter("api")
			if err != nil {
				t.Fatal(err)
			}
			l.Allow(ctx, "k")
			if r, err := l.Reserve(ctx, "k", 1); err != nil || !r.OK() {
				t.Fatalf("Reserve: %v", err)
			}
			l.Reserve(ctx, "k", 1)
		}, []count{{"api", ResultAllowed, 2}, {"api", ResultRefused, 1}}},
		{"several limits: once per check", func(t *testing.T, n *Node) {
			for range 3 {
				n.Allow(ctx, "multi", "k", 1)
			}
			n.Allow(ctx, "multi", "", 1)
		}, []count{{"multi", ResultAllowed, 2}, {"multi", ResultRefused, 1}, {"multi", ResultError, 1}}},
		{"AllowAll: each check, the refused one's probes too", func(t *testing.T, n *Node) {
			for range 2 {
				if _, ok, err := n.AllowAll(ctx, []Check{{"api", "k", 1}, {"multi", "k", 1}}); err != nil || !ok {
					t.Fatalf("AllowAll: %v %v", ok, err)
				}
			}
			// api refuses; multi is asked about one hit without spending it.
			if _, ok, err := n.AllowAll(ctx, []Check{{"api", "k", 1}, {"multi", "k", 1}}); err != nil || ok {
				t.Fatalf("AllowAll: %v %v, want a refusal", ok, err)
			}
			if _, _, err := n.AllowAll(ctx, []Check{{"api", "k", 1}, {"multi", "", 1}}); err == nil {
				t.Fatal("AllowAll with an empty key: no error")
			}
		}, []count{{"api", ResultAllowed, 2}, {"api", ResultRefused, 1}, {"multi", ResultAllowed, 2},
			{"multi", ResultRefused, 1}, {"multi", ResultError, 1}}},
		{"shadow mode", func(t *testing.T, n *Node) {
			for range 3 {
				if d, err := n.Allow(ctx, "dry", "k", 1); err != nil || !d.Allowed {
					t.Fatalf("Allow: %+v %v", d, err)
				}
			}
		}, []count{{"dry", ResultAllowed, 1}, {"dry", ResultShadowRefused, 2}, {"dry", ResultRefused, 0}}},
		{"a rule the node does not have", func(t *testing.T, n *Node) {
			n.Allow(ctx, "nope", "k", 1)
			if got := n.Metrics().UnknownRuleChecks; got != 1 {
				t.Errorf("UnknownRuleChecks = %d, want 1", got)
			}
		}, []count{{"api", ResultError, 0}}},
		{"a closed node", func(t *testing.T, n *Node) {
			n.Close()
			n.Allow(ctx, "api", "k", 1)
			n.AllowAll(ctx, []Check{{"multi", "k", 1}})
		}, []count{{"api", ResultError, 1}, {"multi", ResultError, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := time.Unix(1_800_000_000, 0)
			n, err := Start(ctx, Config{Name: "stats", Rules: statsRules, Logger: testLogger(t),
				Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			tc.checks(t, n)
			for _, c := range tc.want {
				d := decisionsOf(t, n, c.rule)
				if got := d.Of(local, c.result); got != c.want {
					t.Errorf("%s %v = %d, want %d (all: %v)", c.rule, c.result, got, c.want, d)
				}
			}
			var total uint64
			for _, c := range tc.want {
				total += c.want
			}
			var counted uint64
			for _, st := range n.RuleStats() {
				counted += st.Decisions.Total()
			}
			if counted != total {
				t.Errorf("%d checks counted in all, want %d", counted, total)
			}
		})
	}
}

// TestRuleStatsAcrossReload checks that a rule's counts go on across a
// reload that keeps it, whatever it changes, and that a rule removed
// leaves the stats.
func TestRuleStatsAcrossReload(t *testing.T) {
	ctx := context.Background()
	n, err := Start(ctx, Config{Name: "reload", Rules: statsRules, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	n.Allow(ctx, "api", "k", 1)
	n.Allow(ctx, "multi", "k", 1)
	longer := []window.Rule{
		{Name: "api", Count: 2, Window: time.Hour, Type: window.Fixed}, // a new window: a new table
		{Name: "multi", Count: 5, Window: time.Minute, Type: window.Fixed},
	}
	if err := n.Reload(ctx, longer); err != nil {
		t.Fatal(err)
	}
	n.Allow(ctx, "api", "k", 1)
	n.Allow(ctx, "multi", "k", 1)
	for _, rule := range []string{"api", "multi"} {
		d := decisionsOf(t, n, rule)
		if got := d.Of(window.PathLocal, ResultAllowed); got != 2 {
			t.Errorf("%s: %d admitted after the reload, want 2", rule, got)
		}
	}
	if got := len(n.RuleStats()); got != 2 {
		t.Errorf("%d rules in RuleStats after dropping one, want 2", got)
	}
	if m := n.Metrics(); m.Reloads != 1 || m.ReloadErrors != 0 {
		t.Errorf("Reloads %d, ReloadErrors %d; want 1, 0", m.Reloads, m.ReloadErrors)
	}
	n.ReloadFailed()
	if err := n.Reload(ctx, []window.Rule{{Name: "bad"}}); err == nil {
		t.Fatal("Reload of an invalid rule: no error")
	}
	if m := n.Metrics(); m.Reloads != 1 || m.ReloadErrors != 2 {
		t.Errorf("Reloads %d, ReloadErrors %d; want 1, 2", m.Reloads, m.ReloadErrors)
	}
}

// TestDecisionLatencyPaths checks the paths DecisionLatency names, that
// only local is sampled, and that a histogram's buckets are cumulative.
func TestDecisionLatencyPaths(t *testing.T) {
	n, err := Start(context.Background(), Config{Name: "lat", Rules: statsRules, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	for range 2000 {
		n.Allow(context.Background(), "api", "k", 0)
	}
	var paths []string
	for _, pl := range n.DecisionLatency() {
		paths = append(paths, pl.Path)
		if pl.Sampled != (pl.Path == "local") {
			t.Errorf("%s: Sampled = %v", pl.Path, pl.Sampled)
		}
		h := pl.Latency
		for i := 1; i < len(h.Buckets); i++ {
			if h.Buckets[i].Count < h.Buckets[i-1].Count || h.Buckets[i].UpperBound <= h.Buckets[i-1].UpperBound {
				t.Errorf("%s: bucket %d %+v after %+v", pl.Path, i, h.Buckets[i], h.Buckets[i-1])
			}
		}
		if last := h.Buckets[len(h.Buckets)-1]; last.Count > h.Count {
			t.Errorf("%s: last bucket %d above the count %d", pl.Path, last.Count, h.Count)
		}
		// About 1 in 64 of 2,000 checks on the wall clock: 31 expected.
		if pl.Path == "local" && (h.Count < 5 || h.Count > 150) {
			t.Errorf("local: %d of 2000 checks timed, want about 31", h.Count)
		}
	}
	want := "local strict fail-open fail-closed fail-local borrow"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("paths %q, want %q", got, want)
	}
}
