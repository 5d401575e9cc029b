package counter

import (
	"testing"

	"pgregory.net/rapid"
)

func allAlive(uint32) bool { return true }

// sharedWithNeeds is a key's shared state with one heard peer per need.
func sharedWithNeeds(needs []int64) *shared {
	x := &shared{}
	for i, n := range needs {
		x.peers = append(x.peers, peerEntry{inc: uint32(i + 1), heard: true, need: n})
	}
	return x
}

func TestScarcityMargins(t *testing.T) {
	tests := []struct {
		name       string
		own        int64
		peers      []int64
		stock      int64
		wantOwn    int64
		wantPeers0 int64
	}{
		// ample(10) = 20 + 10 + 1 = 31; ample(2) = 4 + 5 + 1 = 10.
		{"plentiful: ample needs", 10, []int64{2}, 1000, 31, 10},
		{"exactly ample", 10, []int64{2}, 41, 31, 10},
		// needs 12, amples 41: 18/29 of each margin fits, rounded up:
		// ⌈21 × 18/29⌉ = 14 and ⌈8 × 18/29⌉ = 5.
		{"short: margins shrink", 10, []int64{2}, 30, 10 + 14, 2 + 5},
		{"needs just fit: no margin", 10, []int64{2}, 12, 10, 2},
		// 6 of 12 needed: half of each need.
		{"needs do not fit", 10, []int64{2}, 6, 5, 1},
		{"nothing left: one each", 10, []int64{2}, 0, 1, 1},
		{"quiet node keeps one", 0, []int64{40}, 40, 1, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := scarcity(sharedWithNeeds(tt.peers), allAlive, tt.own, int32(1+len(tt.peers)), 1000, tt.stock)
			if got := sc.margin(tt.own); got != tt.wantOwn {
				t.Errorf("own margin %d, want %d (%+v)", got, tt.wantOwn, sc)
			}
			if got := sc.margin(tt.peers[0]); got != tt.wantPeers0 {
				t.Errorf("peer margin %d, want %d (%+v)", got, tt.wantPeers0, sc)
			}
		})
	}
}

// Every node's margin lies between its share of the stock and its ample
// need, and when the stock is short the margins together take no more than
// it, but for rounding up (one per node).
func TestScarcityMarginsFitTheStock(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		needs := rapid.SliceOfN(rapid.Int64Range(0, 5000), 1, 16).Draw(t, "needs")
		stock := rapid.Int64Range(-100, 50000).Draw(t, "stock")
		sc := scarcity(sharedWithNeeds(needs[1:]), allAlive, needs[0], int32(len(needs)), 1_000_000, stock)
		var sum, amples int64
		for _, n := range needs {
			m := sc.margin(n)
			if m < 1 || m > max(ample(n), 1) {
				t.Fatalf("margin(%d) = %d, want within [1, %d] (%+v)", n, m, ample(n), sc)
			}
			sum += m
			amples += ample(n)
		}
		if amples > stock && sum > max(stock, 0)+int64(len(needs)) {
			t.Fatalf("margins %d exceed the stock %d by more than rounding (%d nodes, %+v)", sum, stock, len(needs), sc)
		}
	})
}
