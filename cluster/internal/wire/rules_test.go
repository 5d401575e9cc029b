package wire

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestAllocationWireNumbersAreFixed pins each policy's number on the wire:
// logs and peers from before owner became the default read 0 as adaptive.
func TestAllocationWireNumbersAreFixed(t *testing.T) {
	for _, tc := range []struct {
		alloc window.Allocation
		wire  uint32
	}{
		{window.Adaptive, 0},
		{window.Classic, 1},
		{window.Owner, 2},
	} {
		t.Run(tc.alloc.String(), func(t *testing.T) {
			r := window.Rule{Name: "r", Count: 10, Window: time.Second, SyncInterval: 100 * time.Millisecond,
				Allocation: tc.alloc}
			m := EncodeRules([]window.Rule{r})
			if got := m.GetRules()[0].GetAllocation(); got != tc.wire {
				t.Fatalf("%v is %d on the wire, want %d", tc.alloc, got, tc.wire)
			}
			back, err := DecodeRules(m)
			if err != nil {
				t.Fatal(err)
			}
			if back[0].Allocation != tc.alloc {
				t.Fatalf("wire %d reads back as %v, want %v", tc.wire, back[0].Allocation, tc.alloc)
			}
		})
	}
	m := EncodeRules([]window.Rule{{Name: "r", Count: 10, Window: time.Second, SyncInterval: time.Second}})
	m.GetRules()[0].Allocation = 3
	if _, err := DecodeRules(m); err == nil {
		t.Fatal("allocation 3 was accepted")
	}
}

// TestRulesRoundTrip checks that the strict log's rules come back as they
// went, field for field: shadow mode, and the parts of a rule with several
// limits, named after it. A log whose rules lost a field never matches
// the node's, and the node waits for a leader that knows them for ever.
func TestRulesRoundTrip(t *testing.T) {
	rules := window.AllParts([]window.Rule{
		{Name: "pay", Count: 3, Window: time.Second, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed,
			Also: []window.Limit{{Count: 50, Window: time.Minute, Type: window.Sliding}}},
		{Name: "trial", Count: 2, Window: time.Minute, SyncInterval: window.Strict, Shadow: true},
		{Name: "api", Count: 10, Window: time.Second, SyncInterval: 100 * time.Millisecond, Allocation: window.Adaptive},
	})
	back, err := DecodeRules(EncodeRules(rules))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(rules) {
		t.Fatalf("%d rules back, want %d", len(back), len(rules))
	}
	for i := range rules {
		if !back[i].Equal(rules[i]) {
			t.Errorf("rule %d: %+v back, want %+v", i, back[i], rules[i])
		}
	}
	bad := EncodeRules([]window.Rule{{Name: "pay#9", Count: 1, Window: time.Second, SyncInterval: window.Strict}})
	if _, err := DecodeRules(bad); err == nil {
		t.Fatal("a part numbered past window.MaxLimits was accepted")
	}
}
