package strict

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// stillHost is the part of a node failModeAll reads: a clock that stands
// still, and a flag for counts changed outside the log.
type stillHost struct {
	strictapi.Host // nil: failModeAll calls nothing else
	now            int64
	changed        *bool
}

func (h stillHost) Now() int64   { return h.now }
func (h stillHost) MarkChanged() { *h.changed = true }

// TestFailModeAllIsAllOrNothing checks the answer, without a leader, to
// checks decided all or nothing: each by its rule's fail mode, a refusal
// (fail_mode closed, or a local one that does not fit) gives back what the
// local checks before it counted and spends nothing after it, and a
// refusal under a rule in shadow mode refuses nothing else.
func TestFailModeAllIsAllOrNothing(t *testing.T) {
	now := int64(1_900_000_000)*int64(time.Second) + int64(30*time.Second)
	rule := func(name string, count int64, fm window.FailMode, shadow bool) window.Rule {
		return window.Rule{Name: name, Count: count, Window: time.Minute, Type: window.Fixed,
			SyncInterval: window.Strict, FailMode: fm, Shadow: shadow}
	}
	local := rule("local", 5, window.FailLocal, false)
	local2 := rule("local2", 2, window.FailLocal, false)
	open := rule("open", 5, window.FailOpen, false)
	closed := rule("closed", 5, window.FailClosed, false)
	shadow := rule("shadow", 1, window.FailLocal, true)
	type part struct {
		rule window.Rule
		hits int64
	}
	for _, tc := range []struct {
		name    string
		spent   map[string]int64 // counted before, per rule, on key k
		parts   []part
		allowed bool
		counts  map[string]int64 // what each local rule holds for k after
		paths   []window.Path
	}{
		{"local parts that fit", nil, []part{{local, 2}, {local2, 2}}, true,
			map[string]int64{"local": 2, "local2": 2}, []window.Path{window.PathFailLocal, window.PathFailLocal}},
		{"the second local part full: the first gives back", map[string]int64{"local2": 1}, []part{{local, 2}, {local2, 2}}, false,
			map[string]int64{"local": 0, "local2": 1}, []window.Path{window.PathFailLocal, window.PathFailLocal}},
		{"open admits, a local refusal refuses", map[string]int64{"local2": 2}, []part{{open, 1}, {local2, 1}}, false,
			map[string]int64{"local2": 2}, []window.Path{window.PathFailOpen, window.PathFailLocal}},
		{"closed first: the local part spends nothing", nil, []part{{closed, 1}, {local, 3}}, false,
			map[string]int64{"local": 0}, []window.Path{window.PathFailClosed, window.PathFailLocal}},
		{"closed last: the local part gives back", nil, []part{{local, 3}, {closed, 1}}, false,
			map[string]int64{"local": 0}, []window.Path{window.PathFailLocal, window.PathFailClosed}},
		{"a shadow refusal refuses nothing else", map[string]int64{"shadow": 1}, []part{{shadow, 1}, {local, 2}}, true,
			map[string]int64{"local": 2, "shadow": 1}, []window.Path{window.PathFailLocal, window.PathFailLocal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := []window.Rule{local, local2, open, closed, shadow}
			rp, err := counter.NewReplica(counter.Config{Self: counter.Incarnation{Node: "n", Boot: 1}, Rules: rules, Start: now - int64(time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			for name, n := range tc.spent {
				if d, err := rp.Allow(now, name, "k", n); err != nil || !d.Allowed {
					t.Fatalf("spending %d of %s: %+v, %v", n, name, d, err)
				}
			}
			changed := false
			e := &engine{h: stillHost{now: now, changed: &changed}, replica: rp, c: &strictapi.Counters{},
				set: strictapi.Settings{Timeout: time.Second}}
			g := &strictGroup{e: e}
			parts := make([]strictPart, len(tc.parts))
			for i, p := range tc.parts {
				parts[i] = strictPart{rule: p.rule, key: "k", hits: p.hits}
			}
			ds, err := g.failModeAll(parts)
			if err != nil {
				t.Fatal(err)
			}
			allowed := true
			for i, d := range ds {
				if d.Path != tc.paths[i] {
					t.Errorf("part %d on path %v, want %v", i, d.Path, tc.paths[i])
				}
				allowed = allowed && (d.Allowed || tc.parts[i].rule.Shadow)
			}
			if allowed != tc.allowed {
				t.Fatalf("admitted %v, want %v: %+v", allowed, tc.allowed, ds)
			}
			for name, want := range tc.counts {
				own, _ := rp.Table(name).Counts("k", now)
				if own.Curr != want {
					t.Errorf("%s holds %d, want %d", name, own.Curr, want)
				}
			}
			if got := e.c.StrictFailovers.Load(); got != int64(len(parts)) {
				t.Errorf("%d fail-mode answers counted, want %d", got, len(parts))
			}
			if admittedLocal := tc.allowed && tc.counts["local"] > 0; changed != admittedLocal || g.outside.Load() != admittedLocal {
				t.Errorf("counts marked changed %v, outside %v; want %v", changed, g.outside.Load(), admittedLocal)
			}
		})
	}
}

// TestFailModeEachIsIndependent checks the answer, without a leader, to a
// batch's checks decided each on its own: each by its rule's fail mode, and
// a refusal gives back nothing the others counted.
func TestFailModeEachIsIndependent(t *testing.T) {
	now := int64(1_900_000_000)*int64(time.Second) + int64(30*time.Second)
	rule := func(name string, count int64, fm window.FailMode) window.Rule {
		return window.Rule{Name: name, Count: count, Window: time.Minute, Type: window.Fixed,
			SyncInterval: window.Strict, FailMode: fm}
	}
	local := rule("local", 3, window.FailLocal)
	closed := rule("closed", 5, window.FailClosed)
	open := rule("open", 5, window.FailOpen)
	rp, err := counter.NewReplica(counter.Config{Self: counter.Incarnation{Node: "n", Boot: 1},
		Rules: []window.Rule{local, closed, open}, Start: now - int64(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	changed := false
	e := &engine{h: stillHost{now: now, changed: &changed}, replica: rp, c: &strictapi.Counters{},
		set: strictapi.Settings{Timeout: time.Second}}
	g := &strictGroup{e: e}
	parts := []strictPart{{local, "k", 2}, {closed, "k", 1}, {local, "k", 2}, {open, "k", 1}, {local, "k", 1}}
	want := []struct {
		allowed bool
		path    window.Path
	}{{true, window.PathFailLocal}, {false, window.PathFailClosed}, {false, window.PathFailLocal},
		{true, window.PathFailOpen}, {true, window.PathFailLocal}}
	ds, err := g.failModeEach(parts)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if d.Allowed != want[i].allowed || d.Path != want[i].path {
			t.Errorf("check %d: allowed %v on %v, want %v on %v", i, d.Allowed, d.Path, want[i].allowed, want[i].path)
		}
	}
	if own, _ := rp.Table("local").Counts("k", now); own.Curr != 3 {
		t.Errorf("local holds %d, want the 3 its admitted checks counted", own.Curr)
	}
	if got := e.c.StrictFailovers.Load(); got != int64(len(parts)) {
		t.Errorf("%d fail-mode answers counted, want %d", got, len(parts))
	}
	if !changed || !g.outside.Load() {
		t.Errorf("counts marked changed %v, outside %v; want both", changed, g.outside.Load())
	}
}
