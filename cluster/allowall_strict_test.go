package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// TestAllowAllStrictPartLast checks an all-or-nothing check with strict
// parts: they are decided only once the batched one fits, a strict refusal
// gives the batched hits back, and two strict parts are decided together,
// in one run of the log: one refused, the other keeps nothing.
func TestAllowAllStrictPartLast(t *testing.T) {
	if testing.Short() {
		t.Skip("elects a strict leader")
	}
	pay := window.Rule{Name: "pay", Count: 3, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	pay2 := window.Rule{Name: "pay2", Count: 3, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	burst := window.Rule{Name: "burst", Count: 10, Window: time.Hour, Type: window.Fixed}
	nd := startSoloStrict(t, pay, pay2, burst)
	ctx := context.Background()
	// The strict part first in the list: it is still decided last.
	checks := []cluster.Check{{Rule: "pay", Key: "acct", Hits: 2}, {Rule: "burst", Key: "acct", Hits: 2}}
	ds, ok, err := nd.AllowAll(ctx, checks)
	if err != nil || !ok || ds[0].Path != window.PathStrict || ds[0].Remaining != 1 || ds[1].Remaining != 8 {
		t.Fatalf("first: ok %v, %+v, %v", ok, ds, err)
	}
	ds, ok, err = nd.AllowAll(ctx, checks)
	if err != nil || ok || ds[0].Allowed || !ds[1].Allowed {
		t.Fatalf("second, the strict part full: ok %v, %+v, %v", ok, ds, err)
	}
	if own, _, _ := nd.View("burst", "acct"); own.Curr != 2 {
		t.Fatalf("burst holds %d after the strict refusal, want the first check's 2", own.Curr)
	}

	left := func(rule, key string) int64 {
		t.Helper()
		d, err := nd.Allow(ctx, rule, key, 0)
		if err != nil || d.Path != window.PathStrict {
			t.Fatalf("%s/%s: %+v, %v", rule, key, d, err)
		}
		return d.Remaining
	}
	two := []cluster.Check{{Rule: "burst", Key: "acct", Hits: 1}, {Rule: "pay", Key: "b", Hits: 1}, {Rule: "pay2", Key: "b", Hits: 2}}
	ds, ok, err = nd.AllowAll(ctx, two)
	if err != nil || !ok || ds[1].Remaining != 2 || ds[2].Remaining != 1 || ds[1].Path != window.PathStrict {
		t.Fatalf("two strict parts that fit: ok %v, %+v, %v", ok, ds, err)
	}
	// pay2 has 1 left: the second check is refused there, and pay gives
	// its hit back.
	ds, ok, err = nd.AllowAll(ctx, two)
	if err != nil || ok || ds[2].Allowed || ds[2].RetryAfter <= 0 {
		t.Fatalf("two strict parts, the second full: ok %v, %+v, %v", ok, ds, err)
	}
	if got := left("pay", "b"); got != 2 {
		t.Fatalf("pay/b has %d left after pay2 refused, want 2: the refused check kept its hit", got)
	}
	if got := left("pay2", "b"); got != 1 {
		t.Fatalf("pay2/b has %d left, want 1", got)
	}
	if own, _, _ := nd.View("burst", "acct"); own.Curr != 3 {
		t.Fatalf("burst holds %d, want 3: the refused check's hit given back", own.Curr)
	}
}
