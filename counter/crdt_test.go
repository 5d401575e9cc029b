package counter

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
	"pgregory.net/rapid"
)

// state is a replica's view flattened for comparison:
// "rule key window node/boot" → admitted, demand.
type state map[string][2]int64

func stateOf(r *Replica, now int64) state {
	s := state{}
	snap := r.Snapshot(now)
	for _, rd := range snap.Rules {
		for _, e := range rd.Entries {
			inc := snap.Incarnations[e.Inc]
			s[fmt.Sprintf("%s %s %d %s/%d", rd.Rule, e.Key, e.Window, inc.Node, inc.Boot)] = [2]int64{e.Admitted, e.Demand}
		}
	}
	return s
}

var crdtRule = window.Rule{Name: "r", Count: 1000, Window: time.Second, SyncInterval: 100 * time.Millisecond}

// genDelta draws a delta from one of four incarnations, with entries for a
// few keys in the two live windows at t0.
func genDelta(t *rapid.T) *Delta {
	idx := window.Index(t0, time.Second)
	inc := Incarnation{Node: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "node"), Boot: rapid.Uint64Range(1, 2).Draw(t, "boot")}
	d := &Delta{From: inc, Incarnations: []Incarnation{inc}}
	entries := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Entry {
		return Entry{
			Key:      rapid.SampledFrom([]string{"x", "y", "z"}).Draw(t, "key"),
			Window:   idx - rapid.Int64Range(0, 1).Draw(t, "age"),
			Admitted: rapid.Int64Range(0, 50).Draw(t, "admitted"),
			Demand:   rapid.Int64Range(0, 50).Draw(t, "demand"),
		}
	}), 1, 6).Draw(t, "entries")
	d.Rules = []RuleDelta{{Rule: crdtRule.Name, Entries: entries}}
	return d
}

func fresh(t *rapid.T) *Replica {
	r, err := NewReplica(Config{Self: Incarnation{Node: "self", Boot: 9}, Rules: []window.Rule{crdtRule}, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mergeAll(t *rapid.T, r *Replica, ds ...*Delta) *Replica {
	for _, d := range ds {
		if _, err := r.Receive(t0, d); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// pullAll merges snapshots into r as state it asked for: a snapshot names
// incarnations r has not heard of.
func pullAll(t *rapid.T, r *Replica, ds ...*Delta) *Replica {
	for _, d := range ds {
		if _, err := r.ReceiveFrom(t0, d, Origin{Asked: true}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestPropertyMergeCommutative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ds := rapid.SliceOfN(rapid.Custom(genDelta), 1, 8).Draw(t, "deltas")
		perm := rapid.Permutation(ds).Draw(t, "order")
		a := stateOf(mergeAll(t, fresh(t), ds...), t0)
		b := stateOf(mergeAll(t, fresh(t), perm...), t0)
		if !maps.Equal(a, b) {
			t.Fatalf("merge order changed the state:\n%v\n%v", a, b)
		}
	})
}

func TestPropertyMergeIdempotent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ds := rapid.SliceOfN(rapid.Custom(genDelta), 1, 8).Draw(t, "deltas")
		// Every delta duplicated, some replayed late, plus the replica's own
		// snapshot merged back into it.
		dup := append(append([]*Delta{}, ds...), ds...)
		dup = rapid.Permutation(dup).Draw(t, "replayed")
		once := mergeAll(t, fresh(t), ds...)
		want := stateOf(once, t0)
		mergeAll(t, once, once.Snapshot(t0))
		if got := stateOf(once, t0); !maps.Equal(got, want) {
			t.Fatalf("merging a state into itself changed it:\n%v\n%v", want, got)
		}
		if got := stateOf(mergeAll(t, fresh(t), dup...), t0); !maps.Equal(got, want) {
			t.Fatalf("duplicated, reordered deltas changed the state:\n%v\n%v", want, got)
		}
	})
}

func TestPropertyMergeAssociative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Custom(genDelta).Draw(t, "a")
		b := rapid.Custom(genDelta).Draw(t, "b")
		c := rapid.Custom(genDelta).Draw(t, "c")
		// (a ⊔ b) ⊔ c
		ab := mergeAll(t, fresh(t), a, b)
		left := stateOf(mergeAll(t, pullAll(t, fresh(t), ab.Snapshot(t0)), c), t0)
		// a ⊔ (b ⊔ c)
		bc := mergeAll(t, fresh(t), b, c)
		right := stateOf(pullAll(t, mergeAll(t, fresh(t), a), bc.Snapshot(t0)), t0)
		if !maps.Equal(left, right) {
			t.Fatalf("(a⊔b)⊔c != a⊔(b⊔c):\n%v\n%v", left, right)
		}
	})
}

// The view a replica decides from is the sum of per-incarnation maxima.
func TestPropertyViewIsSumOfMaxima(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ds := rapid.SliceOfN(rapid.Custom(genDelta), 1, 10).Draw(t, "deltas")
		r := mergeAll(t, fresh(t), ds...)
		idx := window.Index(t0, time.Second)
		maxima := map[string]int64{}
		for _, d := range ds {
			for _, e := range d.Rules[0].Entries {
				k := fmt.Sprintf("%s %d %v", e.Key, e.Window, d.From)
				maxima[k] = max(maxima[k], e.Admitted)
			}
		}
		for _, key := range []string{"x", "y", "z"} {
			var want window.Counts
			for k, v := range maxima {
				var kk string
				var w int64
				fmt.Sscanf(k, "%s %d", &kk, &w)
				if kk != key {
					continue
				}
				if w == idx {
					want.Curr += v
				} else {
					want.Prev += v
				}
			}
			if _, got := r.Table(crdtRule.Name).Counts(key, t0); got != want {
				t.Fatalf("key %s: view %+v, want %+v", key, got, want)
			}
		}
	})
}
