package strict

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// TestStrictKeysCounted: the keys of a strict rule live in the log's state
// machine, and the node's RuleStats (sluice_keys) count them there.
func TestStrictKeysCounted(t *testing.T) {
	rule := window.Rule{Name: "pay", Count: 5, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	cfg := cluster.Config{Name: "solo", Rules: []window.Rule{rule}, Logger: testLogger(t), Now: clockOf(sharedClock(time.Hour))}
	patientStrict(&cfg)
	n, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	const keys = 40
	for i := range keys {
		if d, err := n.Allow(context.Background(), "pay", "acct:"+strconv.Itoa(i), 1); err != nil || d.Path != window.PathStrict {
			t.Fatalf("check %d: %+v, %v; want a strict decision", i, d, err)
		}
	}
	st := n.RuleStats()
	if len(st) != 1 || len(st[0].Keys) != 1 || st[0].Keys[0].Keys != keys {
		t.Fatalf("RuleStats %+v, want %d keys of pay", st, keys)
	}
}
