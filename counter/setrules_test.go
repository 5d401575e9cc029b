package counter

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

func TestSetRulesCarriesCounts(t *testing.T) {
	base := window.Rule{Name: "api", Count: 100, Window: 10 * time.Second, Type: window.Sliding,
		SyncInterval: time.Second}
	tests := []struct {
		name   string
		change func(window.Rule) window.Rule
		keeps  bool
	}{
		{"same rule", func(r window.Rule) window.Rule { return r }, true},
		{"new count", func(r window.Rule) window.Rule { r.Count = 50; return r }, true},
		{"new sync", func(r window.Rule) window.Rule { r.SyncInterval = 2 * time.Second; return r }, true},
		{"new allocation", func(r window.Rule) window.Rule { r.Allocation = window.Classic; return r }, true},
		{"batched to strict", func(r window.Rule) window.Rule { r.SyncInterval = window.Strict; return r }, true},
		{"new window", func(r window.Rule) window.Rule { r.Window = 20 * time.Second; return r }, false},
		{"new type", func(r window.Rule) window.Rule { r.Type = window.Fixed; return r }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestReplica(t, "a", base)
			b := newTestReplica(t, "b", base)
			a.SetPeers([]Incarnation{b.Self()})
			b.SetPeers([]Incarnation{a.Self()})
			for range 10 {
				a.Allow(t0+1, "api", "k", 1)
				b.Allow(t0+1, "api", "k", 1)
			}
			for _, o := range b.Tick(t0 + sec) {
				a.Receive(t0+sec, o.Delta)
			}
			_, before := a.Table("api").Counts("k", t0+sec)
			if before.Curr != 20 {
				t.Fatalf("before the change a sees %d, want 20", before.Curr)
			}
			if err := a.SetRules([]window.Rule{tt.change(base)}, t0+sec); err != nil {
				t.Fatal(err)
			}
			own, after := a.Table("api").Counts("k", t0+sec)
			if tt.keeps && (after != before || own.Curr != 10) {
				t.Fatalf("after the change a sees %+v (own %+v), want %+v (own 10)", after, own, before)
			}
			if !tt.keeps && after != (window.Counts{}) {
				t.Fatalf("a changed window kept counts %+v", after)
			}
			// The next round still syncs the rule.
			a.Allow(t0+sec+1, "api", "k", 1)
			sent := 0
			for _, o := range a.Tick(t0 + 3*sec) {
				sent += o.Delta.Size()
			}
			if changed := tt.change(base); !changed.IsStrict() && sent == 0 {
				t.Fatal("no delta after the change")
			}
		})
	}
}

func TestSetRulesDropsAndRejects(t *testing.T) {
	base := window.Rule{Name: "api", Count: 100, Window: time.Second, SyncInterval: 100 * time.Millisecond}
	r := newTestReplica(t, "a", base)
	other := base
	other.Name = "other"
	if err := r.SetRules([]window.Rule{other}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Allow(t0, "api", "k", 1); !errors.Is(err, ErrUnknownRule) {
		t.Fatalf("a dropped rule: %v, want ErrUnknownRule", err)
	}
	if _, err := r.Allow(t0, "other", "k", 1); err != nil {
		t.Fatalf("the new rule: %v", err)
	}
	bad := base
	bad.Count = 0
	if err := r.SetRules([]window.Rule{bad}, t0); err == nil {
		t.Fatal("SetRules accepted count 0")
	}
	if err := r.SetRules([]window.Rule{base, base}, t0); err == nil {
		t.Fatal("SetRules accepted a duplicate name")
	}
	if _, err := r.Allow(t0, "other", "k", 1); err != nil {
		t.Fatalf("a rejected change must leave the rules alone: %v", err)
	}
}

// TestCountsHeldUnderAnotherWayReachTheOwner checks that counts a node
// learnt of an incarnation that will never report them to a key's owner
// (a strict log's, handed back to the batched tables while this node still
// treated the rule as strict) count in the owner's decisions once the rule
// is owner-allocated again: at once if the node that learnt them owns the
// key, from the next round if it passes them on to the owner.
func TestCountsHeldUnderAnotherWayReachTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		toOwner bool
	}{
		{"held by the owner", true},
		{"held by another node", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owned := ownedRule(100, time.Minute, window.Fixed)
			strict := owned
			strict.SyncInterval = window.Strict
			f := newOwnedFleet(t, 3, owned)
			const key = "k"
			now := t0 + sec
			oi := f.ownerIndex(key)
			for i := range f.nodes {
				for range 5 {
					if d := f.allow(i, now, key, 1); !d.Allowed {
						t.Fatalf("node %d refused in the batched phase: %+v", i, d)
					}
				}
			}
			f.tick(now + int64(100*time.Millisecond))
			now += int64(200 * time.Millisecond)
			for _, rp := range f.nodes {
				if err := rp.SetRules([]window.Rule{strict}, now); err != nil {
					t.Fatal(err)
				}
			}
			// The log admitted 60 more; its counts come back as a
			// snapshot from the leader while the rule is still strict on
			// the node that learns them, which, not having heard of the
			// log's incarnation, pulls them: state it asked for.
			logRep := newTestReplica(t, "log", owned)
			for range 60 {
				logRep.Allow(now, "api", key, 1)
			}
			handoff := logRep.Snapshot(now)
			learner := oi
			if !tc.toOwner {
				learner = (oi + 2) % 3
			}
			handoff.From = f.nodes[(oi+1)%3].Self()
			if _, err := f.nodes[learner].ReceiveFrom(now, handoff, Origin{Asked: true}); err != nil {
				t.Fatal(err)
			}
			for _, rp := range f.nodes {
				if err := rp.SetRules([]window.Rule{owned}, now); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.toOwner {
				now += int64(100 * time.Millisecond)
				f.tick(now)
			}
			// A burst on the owner: 25 are left of the 100.
			admitted := int64(0)
			for range 40 {
				if d := f.allow(oi, now, key, 1); d.Allowed {
					admitted++
				}
			}
			if admitted > 25 {
				t.Fatalf("the owner admitted %d of a burst after the switch back, with 25 left", admitted)
			}
			for range 20 {
				now += int64(100 * time.Millisecond)
				f.tick(now)
				for i := range f.nodes {
					for range 5 {
						if d := f.allow(i, now, key, 1); d.Allowed {
							admitted++
						}
					}
				}
			}
			if admitted > 25 || admitted < 22 {
				t.Fatalf("the fleet admitted %d after the switch back, want about the 25 left and no more", admitted)
			}
		})
	}
}
