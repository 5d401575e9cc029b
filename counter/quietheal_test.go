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

// TestQuietKeyAnswerLostBeforeThePeerIsLive checks the heal as it happens
// on real nodes: the key's owner hears the report of a node back from a
// cut before its own membership lists that node, and the answer, to a
// peer not yet live, is lost; no one touches the key again.
func TestQuietKeyAnswerLostBeforeThePeerIsLive(t *testing.T) {
	f := newOwnedFleet(t, 3, ownedRule(window.MaxCount, time.Hour, window.Fixed))
	// Node 1 owns the key and is the one cut off; node 0 its standby.
	key := f.keyOwned(1, 0)
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
		admit(i, 1)
	}
	ticks(5)
	a, b, c := f.nodes[0], f.nodes[1], f.nodes[2]
	all := []Incarnation{a.Self(), b.Self(), c.Self()}
	a.SetPeers([]Incarnation{a.Self(), c.Self()})
	c.SetPeers([]Incarnation{a.Self(), c.Self()})
	b.SetPeers([]Incarnation{b.Self()})
	f.down[b.Self().Node] = true
	admit(0, 3)
	admit(2, 3)
	ticks(5)
	// The heal: b and c find each other first.
	f.down[b.Self().Node] = false
	b.SetPeers([]Incarnation{b.Self(), c.Self()})
	c.SetPeers(all)
	ticks(3)
	// a finds b and reports to it; b, whose membership does not list a
	// yet, answers into the void.
	a.SetPeers(all)
	now += int64(100 * time.Millisecond)
	for _, o := range a.Tick(now) {
		to := f.node(o.To)
		if _, err := to.Receive(now, o.Delta); err != nil {
			t.Fatal(err)
		}
	}
	for _, rp := range []*Replica{b, c} {
		f.deliver(now, rp.Tick(now))
	}
	// Before b's next round, its stream to c opens again and its
	// membership comes to list a: two resends with no round between.
	b.ResendAll(c.Self())
	b.SetPeers(all)
	ticks(10)
	for i, rp := range f.nodes {
		if _, view := rp.Table("api").Counts(key, now); view.Curr != 9 {
			t.Errorf("node %d sees %d admitted, want the 9 admitted: %s", i, view.Curr, describeKey(rp, key))
		}
	}
}
