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
