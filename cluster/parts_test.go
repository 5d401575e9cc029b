package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestRuleWithSeveralLimits checks a rule holding a burst cap of 2 per
// second and 5 per minute sliding, through Allow, the handle and a
// reservation: a check is admitted only if both limits admit it, nothing
// is spent on either when one refuses, Remaining is the lesser of the two,
// and a cancelled reservation gives the hits back to both.
func TestRuleWithSeveralLimits(t *testing.T) {
	clk := newFrozen(minuteStart + int64(30*time.Second))
	rule := window.Rule{Name: "api", Count: 2, Window: time.Second, Type: window.Fixed,
		Also: []window.Limit{{Count: 5, Window: time.Minute, Type: window.Sliding}}}
	nd := startLone(t, clk.Now, rule)
	ctx := context.Background()
	own := func(part string) int64 {
		o, _, err := nd.View(part, "u")
		if err != nil {
			t.Fatal(err)
		}
		return o.Curr
	}
	steps := []struct {
		name          string
		advance       time.Duration
		hits          int64
		allowed       bool
		remaining     int64
		burst, minute int64 // own counts after
	}{
		{"fits both", 0, 1, true, 1, 1, 1},
		{"fills the burst", 0, 1, true, 0, 2, 2},
		{"burst full: the minute spends nothing", 0, 1, false, 0, 2, 2},
		{"next second", time.Second, 2, true, 0, 2, 4},
		{"the minute refuses 2: the burst gives them back", time.Second, 2, false, 1, 0, 4},
		{"the last one of the minute", 0, 1, true, 0, 1, 5},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		d, err := nd.Allow(ctx, "api", "u", s.hits)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if d.Allowed != s.allowed || d.Remaining != s.remaining || own("api") != s.burst || own("api#2") != s.minute {
			t.Fatalf("%s: %+v, own counts %d and %d; want allowed %v, remaining %d, own %d and %d",
				s.name, d, own("api"), own("api#2"), s.allowed, s.remaining, s.burst, s.minute)
		}
		if !d.Allowed && d.RetryAfter <= 0 {
			t.Fatalf("%s: a refusal without a wait: %+v", s.name, d)
		}
	}
	lim, err := nd.Limiter("api")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := lim.Rule(); !ok || len(r.Also) != 1 {
		t.Fatalf("the handle's rule: %+v, %v; want its extra limit", r, ok)
	}
	clk.Advance(2 * time.Minute)
	res, err := lim.Reserve(ctx, "u", 2)
	if err != nil || !res.OK() || own("api") != 2 || own("api#2") != 2 {
		t.Fatalf("reservation: %+v, %v, own %d and %d", res.Decision(), err, own("api"), own("api#2"))
	}
	if !res.Cancel() || own("api") != 0 || own("api#2") != 0 {
		t.Fatalf("cancelled reservation: own counts %d and %d, want both given back", own("api"), own("api#2"))
	}
}

// TestShadowMode checks that a rule in shadow mode admits every caller,
// says which admissions it would have refused, spends nothing on those and
// counts them; and that in a rule with several limits, or an all-or-nothing
// check, a shadow part's refusal refuses nothing else.
func TestShadowMode(t *testing.T) {
	clk := newFrozen(minuteStart + int64(30*time.Second))
	shadow := window.Rule{Name: "try", Count: 2, Window: time.Minute, Type: window.Fixed, Shadow: true}
	enforced := window.Rule{Name: "api", Count: 5, Window: time.Minute, Type: window.Fixed}
	nd := startLone(t, clk.Now, shadow, enforced)
	ctx := context.Background()
	for i, want := range []bool{false, false, true, true} {
		d, err := nd.Allow(ctx, "try", "u", 1)
		if err != nil || !d.Allowed || d.Shadowed != want {
			t.Fatalf("check %d: %+v, %v; want admitted, shadowed %v", i+1, d, err, want)
		}
	}
	if own, _, _ := nd.View("try", "u"); own.Curr != 2 {
		t.Fatalf("shadow rule counted %d, want the 2 that fit", own.Curr)
	}
	if got := nd.Metrics().ShadowRefusals; got != 2 {
		t.Fatalf("shadow refusals %d, want 2", got)
	}
	ds, ok, err := nd.AllowAll(ctx, []Check{{Rule: "try", Key: "u", Hits: 1}, {Rule: "api", Key: "u", Hits: 1}})
	if err != nil || !ok || !ds[0].Shadowed || !ds[1].Allowed {
		t.Fatalf("all-or-nothing with a full shadow part: ok %v, %+v, %v", ok, ds, err)
	}
	if own, _, _ := nd.View("api", "u"); own.Curr != 1 {
		t.Fatalf("the enforced part counted %d, want 1", own.Curr)
	}
}
