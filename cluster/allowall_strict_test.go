package cluster_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// TestAllowAllStrictPartLast checks an all-or-nothing check with a strict
// part: the strict part is decided only once the batched one fits, a
// strict refusal gives the batched hits back, and two strict parts are
// refused before anything is spent.
func TestAllowAllStrictPartLast(t *testing.T) {
	if testing.Short() {
		t.Skip("elects a strict leader")
	}
	pay := window.Rule{Name: "pay", Count: 3, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	pay2 := window.Rule{Name: "pay2", Count: 3, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	burst := window.Rule{Name: "burst", Count: 10, Window: time.Hour, Type: window.Fixed}
	at := time.Date(2030, 1, 1, 12, 30, 0, 0, time.UTC)
	nd, err := cluster.Start(context.Background(), cluster.Config{Name: "solo", Rules: []window.Rule{pay, pay2, burst},
		Strict: strict.Mode{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return at }, StrictTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
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
	_, ok, err = nd.AllowAll(ctx, []cluster.Check{{Rule: "burst", Key: "acct", Hits: 1}, {Rule: "pay", Key: "b", Hits: 1}, {Rule: "pay2", Key: "b", Hits: 1}})
	if ok || !errors.Is(err, cluster.ErrSeveralStrict) {
		t.Fatalf("two strict parts: ok %v, %v", ok, err)
	}
	if own, _, _ := nd.View("burst", "acct"); own.Curr != 2 {
		t.Fatalf("burst holds %d after a check with two strict parts, want 2", own.Curr)
	}
}
