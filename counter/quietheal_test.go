package counter

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestQuietKeyToldToAPeerBackFromACut checks that a node cut off while a
// key's counts changed comes to see them once it is back, though neither
// it nor anyone else touches the key again: the owner tells a quiet key's
// counts once, and what it told while the node was not live never reached
// it.
func TestQuietKeyToldToAPeerBackFromACut(t *testing.T) {
	f := newOwnedFleet(t, 3, ownedRule(100, time.Minute, window.Fixed))
	// A key node 0 owns with node 1 its standby; node 2 is the one cut off.
	key := f.keyOwned(0, 1)
	now := t0 + sec
	ticks := func(n int) {
		for range n {
			now += int64(100 * time.Millisecond)
			f.tick(now)
		}
	}
	admit := func(i, n int) {
		for range n {
			if d := f.allow(i, now, key, 1); !d.Allowed {
				t.Fatalf("node %d refused: %+v", i, d)
			}
		}
	}
	for i := range f.nodes {
		admit(i, 3)
	}
	ticks(5)
	all := []Incarnation{f.nodes[0].Self(), f.nodes[1].Self(), f.nodes[2].Self()}
	f.nodes[0].SetPeers(all[:2])
	f.nodes[1].SetPeers(all[:2])
	f.nodes[2].SetPeers(all[2:])
	f.down[all[2].Node] = true
	admit(0, 3)
	admit(1, 3)
	ticks(5)
	for _, rp := range f.nodes {
		rp.SetPeers(all)
	}
	f.down[all[2].Node] = false
	ticks(10)
	for i, rp := range f.nodes {
		if _, view := rp.Table("api").Counts(key, now); view.Curr != 15 {
			t.Errorf("node %d sees %d admitted, want the 15 admitted", i, view.Curr)
		}
	}
}
