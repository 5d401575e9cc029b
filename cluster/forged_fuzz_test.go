package cluster

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// FuzzSyncDelta feeds a node's replica whatever a peer's Sync stream may
// bring, as the stream handler does once the sender is a member: a delta
// never fails but as malformed, and whatever it says, no view of a key
// exceeds the count for each of the three incarnations the node knows of.
func FuzzSyncDelta(f *testing.F) {
	now := int64(1_800_000_000) * int64(time.Second)
	idx := window.Index(now, time.Second)
	a := counter.Incarnation{Node: "a", Boot: 1}
	b := counter.Incarnation{Node: "b", Boot: 2}
	c := counter.Incarnation{Node: "c", Boot: 3}
	stranger := counter.Incarnation{Node: "z", Boot: 9}
	for _, d := range []*counter.Delta{
		{From: b, Incarnations: []counter.Incarnation{b}, Rules: []counter.RuleDelta{{Rule: "mesh",
			Entries: []counter.Entry{{Key: "k", Window: idx, Admitted: 3}, {Key: "k", Window: idx + 2, Admitted: 3}}}}},
		{From: b, Full: true, Incarnations: []counter.Incarnation{b, c, stranger}, Rules: []counter.RuleDelta{{Rule: "mesh",
			Entries: []counter.Entry{{Key: "k", Window: idx, Inc: 1, Admitted: 10}, {Key: "k", Window: idx, Inc: 2, Admitted: 10}}}}},
		{From: b, Kind: counter.KindReport, Incarnations: []counter.Incarnation{b}, Rules: []counter.RuleDelta{{Rule: "owned",
			Entries: []counter.Entry{{Key: "k", Window: idx, Admitted: 11, Prev: 4, Grant: 20}}}}},
		{From: c, Kind: counter.KindAnswer, Incarnations: []counter.Incarnation{c}, Rules: []counter.RuleDelta{{Rule: "owned",
			Entries: []counter.Entry{{Key: "k", Window: idx, Admitted: 25, Prev: 20, Grant: 10, Rate: 50, RateFrom: now - 1, Told: 1}}}}},
		{From: c, Kind: counter.KindView, Incarnations: []counter.Incarnation{c}, Rules: []counter.RuleDelta{{Rule: "owned",
			Entries: []counter.Entry{{Key: "k", Window: idx, Admitted: 30, Prev: 31}}}}},
	} {
		f.Add(wire.AppendDelta(nil, d, now))
	}
	rules := []window.Rule{
		{Name: "mesh", Count: 10, Window: time.Second, Type: window.Sliding, SyncInterval: 100 * time.Millisecond, Allocation: window.Adaptive},
		{Name: "owned", Count: 10, Window: time.Second, Type: window.Fixed, SyncInterval: 100 * time.Millisecond},
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, _, err := wire.ParseDelta(msg)
		if err != nil {
			return
		}
		if d.From != b && d.From != c {
			return // refused before the replica sees it: no member sent it
		}
		r, err := counter.NewReplica(counter.Config{Self: a, Rules: rules, Start: now})
		if err != nil {
			t.Fatal(err)
		}
		r.SetPeers([]counter.Incarnation{a, b, c})
		if _, err := r.Receive(now, d); err != nil {
			return // malformed
		}
		for _, rd := range d.Rules {
			tb := r.Table(rd.Rule)
			if tb == nil {
				continue
			}
			for _, e := range rd.Entries {
				if _, view := tb.Counts(e.Key, now); view.Curr > 3*10 || view.Prev > 3*10 {
					t.Fatalf("rule %s key %q: view %+v, over 3 incarnations × count 10", rd.Rule, e.Key, view)
				}
			}
		}
	})
}
