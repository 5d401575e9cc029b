package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// TestCheckBatchStrictInOneEntry checks that a batch's checks under strict
// rules are decided in one entry of the log, each on its own and in order,
// as one after the other would be, beside the batch's batched checks.
func TestCheckBatchStrictInOneEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("elects a strict leader")
	}
	pay := window.Rule{Name: "pay", Count: 3, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	pay2 := window.Rule{Name: "pay2", Count: 2, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	burst := window.Rule{Name: "burst", Count: 1, Window: time.Hour, Type: window.Fixed}
	nd := startSoloStrict(t, pay, pay2, burst)
	ctx := context.Background()
	svc := cluster.NewLimiterService(nd)
	// The first check waits for the leader, so that the batch's checks
	// are the only ones the log takes meanwhile.
	if d, err := nd.Allow(ctx, "pay", "other", 1); err != nil || d.Path != window.PathStrict {
		t.Fatalf("first strict check: %+v, %v", d, err)
	}
	req := func(rule, key string, hits int64) *sluicev1.CheckRequest {
		return &sluicev1.CheckRequest{Rule: rule, Key: key, Hits: hits}
	}
	checks := []*sluicev1.CheckRequest{
		req("pay", "a", 1), req("burst", "a", 1), req("pay", "a", 1), req("pay2", "a", 1),
		req("pay", "a", 1), req("burst", "a", 1), req("pay", "a", 1), req("pay2", "a", 2), req("pay2", "b", 2),
	}
	want := []struct {
		allowed   bool
		remaining int64
	}{{true, 2}, {true, 0}, {true, 1}, {true, 1}, {true, 0}, {false, 0}, {false, 0}, {false, 1}, {true, 0}}
	before := nd.Metrics()
	resp, err := svc.CheckBatch(ctx, &sluicev1.CheckBatchRequest{Checks: checks})
	if err != nil {
		t.Fatal(err)
	}
	after := nd.Metrics()
	for i, r := range resp.GetResults() {
		if r.GetAllowed() != want[i].allowed || r.GetRemaining() != want[i].remaining {
			t.Errorf("results[%d] (%s/%s): allowed %v remaining %d, want %v and %d", i, checks[i].GetRule(), checks[i].GetKey(),
				r.GetAllowed(), r.GetRemaining(), want[i].allowed, want[i].remaining)
		}
	}
	if len(resp.GetResults()) != len(want) {
		t.Fatalf("%d results, want %d", len(resp.GetResults()), len(want))
	}
	entries, strictChecks := after.StrictEntries-before.StrictEntries, after.StrictChecks-before.StrictChecks
	if entries != 1 || strictChecks != 7 {
		t.Errorf("the batch took %d entries of %d checks in all, want its 7 strict checks in 1", entries, strictChecks)
	}
	// Each check counts in its rule's metrics as one check.
	for _, s := range nd.RuleStats() {
		if s.Rule.Name == "pay" {
			if got := s.Decisions.Total(); got != 5 {
				t.Errorf("pay counted %d checks, want 5", got)
			}
		}
	}
}
