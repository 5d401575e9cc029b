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
