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
	k := &keyRun{f: f, key: f.keyOwned(0, 1), now: t0 + sec}
	for i := range f.nodes {
		k.admit(i, 3)
	}
	k.ticks(5)
	all := []Incarnation{f.nodes[0].Self(), f.nodes[1].Self(), f.nodes[2].Self()}
	f.nodes[0].SetPeers(all[:2])
	f.nodes[1].SetPeers(all[:2])
	f.nodes[2].SetPeers(all[2:])
	f.down[all[2].Node] = true
	k.admit(0, 3)
	k.admit(1, 3)
	k.ticks(5)
	for _, rp := range f.nodes {
		rp.SetPeers(all)
	}
	f.down[all[2].Node] = false
	k.ticks(10)
	for i, rp := range f.nodes {
		if _, view := rp.Table("api").Counts(k.key, k.now); view.Curr != 15 {
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
	k := &keyRun{f: f, key: f.keyOwned(1, 0), now: t0 + sec}
	for i := range f.nodes {
		k.admit(i, 1)
	}
	k.ticks(5)
	a, b, c := f.nodes[0], f.nodes[1], f.nodes[2]
	all := []Incarnation{a.Self(), b.Self(), c.Self()}
	a.SetPeers([]Incarnation{a.Self(), c.Self()})
	c.SetPeers([]Incarnation{a.Self(), c.Self()})
	b.SetPeers([]Incarnation{b.Self()})
	f.down[b.Self().Node] = true
	k.admit(0, 3)
	k.admit(2, 3)
	k.ticks(5)
	// The heal: b and c find each other first.
	f.down[b.Self().Node] = false
	b.SetPeers([]Incarnation{b.Self(), c.Self()})
	c.SetPeers(all)
	k.ticks(3)
	// a finds b and reports to it; b, whose membership does not list a
	// yet, answers into the void.
	a.SetPeers(all)
	k.now += int64(100 * time.Millisecond)
	for _, o := range a.Tick(k.now) {
		to := f.node(o.To)
		if _, err := to.Receive(k.now, o.Delta); err != nil {
			t.Fatal(err)
		}
	}
	for _, rp := range []*Replica{b, c} {
		f.deliver(k.now, rp.Tick(k.now))
	}
	// Before b's next round, its stream to c opens again and its
	// membership comes to list a: two resends with no round between.
	b.ResendAll(c.Self())
	b.SetPeers(all)
	k.ticks(10)
	for i, rp := range f.nodes {
		if _, view := rp.Table("api").Counts(k.key, k.now); view.Curr != 9 {
			t.Errorf("node %d sees %d admitted, want the 9 admitted: %s", i, view.Curr, describeKey(rp, k.key))
		}
	}
}
