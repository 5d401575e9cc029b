package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestCancelStrictIsANoOp checks that a strict rule's reservation is
// decided by the log and that Cancel gives nothing back.
func TestCancelStrictIsANoOp(t *testing.T) {
	if testing.Short() {
		t.Skip("elects a strict leader")
	}
	rule := window.Rule{Name: "pay", Count: 5, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	// A fixed clock far from an hour's boundary, and a check that waits for
	// the log as long as a test waits for anything.
	nd := startSoloStrict(t, rule)
	lim, err := nd.Limiter("pay")
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.Reserve(context.Background(), "acct", 2)
	if err != nil || !r.OK() || r.Decision().Path != window.PathStrict {
		t.Fatalf("strict reservation: %+v, %v", r.Decision(), err)
	}
	if r.Cancel() {
		t.Fatal("Cancel on a strict rule reported the hits given back")
	}
	if d, err := lim.AllowN(context.Background(), "acct", 0); err != nil || d.Remaining != 3 {
		t.Fatalf("after Cancel: %+v, %v; want 3 left, the log's", d, err)
	}
}
