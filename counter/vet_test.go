package counter

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// vetCount is the count of the rules the vetting tests use.
const vetCount = 10

// vetTrio returns replicas a, b and c of rule r that know each other as
// peers: a receives, b sends, c is an incarnation a knows of.
func vetTrio(t *testing.T, r window.Rule) (a, b, c *Replica) {
	t.Helper()
	a, b, c = newTestReplica(t, "a", r), newTestReplica(t, "b", r), newTestReplica(t, "c", r)
	all := []Incarnation{a.Self(), b.Self(), c.Self()}
	for _, rp := range []*Replica{a, b, c} {
		rp.SetPeers(all)
	}
	return a, b, c
}

// keyOwnedBy returns a key of rule api whose owner, as r sees the fleet, is
// owner.
func keyOwnedBy(t *testing.T, r *Replica, owner Incarnation) string {
	t.Helper()
	f := r.Table("api").fleet.Load()
	for k := range 1000 {
		key := fmt.Sprint("key-", k)
		if r.reg.inc(f.ownerOf(key)) == owner {
			return key
		}
	}
	t.Fatalf("no key owned by %v", owner)
	return ""
}

// TestReceiveVetsEntries sends a replica each forged shape of entry, beside
// the legitimate one it forges: the forged one is rejected and counted by
// its reason, changing no view; the legitimate one is merged.
func TestReceiveVetsEntries(t *testing.T) {
	now := t0 + int64(100*time.Millisecond)
	idx := window.Index(now, time.Second)
	mesh := rule(vetCount, time.Second, window.Fixed)
	mesh.Allocation = window.Adaptive
	owned := ownedRule(vetCount, time.Second, window.Fixed)
	stranger := Incarnation{Node: "z", Boot: 7}
	// a's registry holds a, b and c: the fleet's count of a key in a window
	// is at most 3 × vetCount, and everyone's but a's 2 × vetCount.
	const others = 2 * vetCount
	tests := []struct {
		name   string
		rule   window.Rule
		origin Origin
		// delta builds the delta b sends a about key (owned by a or by b,
		// as the case says).
		ownedByB bool
		delta    func(a, b, c *Replica, key string) *Delta
		want     Reason // of the rejection, if reject
		reject   bool
	}{
		{name: "own count", rule: mesh, delta: func(_, b, _ *Replica, key string) *Delta {
			return syncDelta(b, Entry{Key: key, Window: idx, Admitted: vetCount})
		}},
		{name: "own count over the count", rule: mesh, want: OverCount, reject: true, delta: func(_, b, _ *Replica, key string) *Delta {
			return syncDelta(b, Entry{Key: key, Window: idx, Admitted: vetCount + 1})
		}},
		{name: "previous window over the count", rule: mesh, want: OverCount, reject: true, delta: func(_, b, _ *Replica, key string) *Delta {
			return syncDelta(b, Entry{Key: key, Window: idx - 1, Admitted: vetCount + 1})
		}},
		{name: "a sender with other rules", rule: mesh, origin: Origin{OtherRules: true}, delta: func(_, b, _ *Replica, key string) *Delta {
			return syncDelta(b, Entry{Key: key, Window: idx, Admitted: 1000})
		}},
		{name: "a sender with other rules over the largest count", rule: mesh, origin: Origin{OtherRules: true}, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return syncDelta(b, Entry{Key: key, Window: idx, Admitted: window.MaxCount + 1})
			}},
		{name: "next window", rule: mesh, delta: func(_, b, _ *Replica, key string) *Delta {
			return syncDelta(b, Entry{Key: key, Window: idx + 1, Admitted: 3})
		}},
		{name: "two windows ahead", rule: mesh, want: FutureWindow, reject: true, delta: func(_, b, _ *Replica, key string) *Delta {
			return syncDelta(b, Entry{Key: key, Window: idx + 2, Admitted: 3})
		}},
		{name: "a relayed incarnation this node knows", rule: mesh, delta: func(_, b, c *Replica, key string) *Delta {
			return relayDelta(b, c.Self(), KindSync, Entry{Key: key, Window: idx, Admitted: 4})
		}},
		{name: "a relayed incarnation this node has not heard of", rule: mesh, want: UnknownIncarnation, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return relayDelta(b, stranger, KindSync, Entry{Key: key, Window: idx, Admitted: 4})
			}},
		{name: "a relayed count over the count", rule: mesh, want: OverCount, reject: true, delta: func(_, b, c *Replica, key string) *Delta {
			return relayDelta(b, c.Self(), KindSync, Entry{Key: key, Window: idx, Admitted: vetCount + 1})
		}},
		{name: "a pulled state naming an incarnation this node has not heard of", rule: mesh, origin: Origin{Asked: true},
			delta: func(_, b, _ *Replica, key string) *Delta {
				return relayDelta(b, stranger, KindSync, Entry{Key: key, Window: idx, Admitted: 4})
			}},
		{name: "a pulled state over the count", rule: mesh, origin: Origin{Asked: true}, delta: func(_, b, _ *Replica, key string) *Delta {
			return syncDelta(b, Entry{Key: key, Window: idx, Admitted: 3 * vetCount})
		}},
		{name: "a pulled state two windows ahead", rule: mesh, origin: Origin{Asked: true}, want: FutureWindow, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return syncDelta(b, Entry{Key: key, Window: idx + 2, Admitted: 3})
			}},

		{name: "report", rule: owned, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindReport, Entry{Key: key, Window: idx, Admitted: vetCount, Prev: vetCount})
		}},
		{name: "report over the count", rule: owned, want: OverCount, reject: true, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindReport, Entry{Key: key, Window: idx, Admitted: vetCount + 1})
		}},
		{name: "report of the previous window over the count", rule: owned, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindReport, Entry{Key: key, Window: idx, Admitted: 1, Prev: vetCount + 1})
			}},
		{name: "report holding a grant over the count", rule: owned, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindReport, Entry{Key: key, Window: idx, Admitted: 1, Grant: vetCount + 1})
			}},
		{name: "report two windows ahead", rule: owned, want: FutureWindow, reject: true, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindReport, Entry{Key: key, Window: idx + 2, Admitted: 1})
		}},
		{name: "handover of an incarnation this node knows", rule: owned, delta: func(_, b, c *Replica, key string) *Delta {
			return relayDelta(b, c.Self(), KindReport, Entry{Key: key, Window: idx, Admitted: 4})
		}},
		{name: "handover of an incarnation this node has not heard of", rule: owned, want: UnknownIncarnation, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return relayDelta(b, stranger, KindReport, Entry{Key: key, Window: idx, Admitted: 4})
			}},
		{name: "standby copy", rule: owned, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindStandby, Entry{Key: key, Window: idx, Admitted: vetCount})
		}},
		{name: "standby copy over the count", rule: owned, want: OverCount, reject: true, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindStandby, Entry{Key: key, Window: idx, Admitted: vetCount + 1})
		}},

		{name: "answer", rule: owned, ownedByB: true, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: others, Prev: others, Grant: vetCount, Next: vetCount, Told: 1})
		}},
		{name: "answer over what everyone else could have admitted", rule: owned, ownedByB: true, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: others + 1, Told: 1})
			}},
		{name: "answer over it in the previous window", rule: owned, ownedByB: true, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: 1, Prev: others + 1, Told: 1})
			}},
		{name: "answer granting over the count", rule: owned, ownedByB: true, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: 1, Grant: vetCount + 1, Told: 1})
			}},
		{name: "answer granting a line that grows over the count", rule: owned, ownedByB: true, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: 1, Grant: 5,
					Rate: vetCount, RateFrom: window.Start(idx, time.Second), Told: 1})
			}},
		{name: "answer granting a line that stays within the count", rule: owned, ownedByB: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: 1, Grant: 5,
					Rate: vetCount / 2, RateFrom: window.Start(idx, time.Second), Told: 1})
			}},
		{name: "answer granting the next window over the count", rule: owned, ownedByB: true, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: 1, Next: vetCount + 1, Told: 1})
			}},
		{name: "settled counts unasked over what everyone else could have admitted", rule: owned, ownedByB: true, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: others + 1})
			}},

		{name: "view", rule: owned, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindView, Entry{Key: key, Window: idx, Admitted: others + 2, Prev: others})
		}},
		{name: "view over what everyone else could have admitted", rule: owned, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				// A view holds a's own 2 hits too.
				return kindDelta(b, KindView, Entry{Key: key, Window: idx, Admitted: others + 2 + 1})
			}},
		{name: "view over it in the previous window", rule: owned, want: OverCount, reject: true,
			delta: func(_, b, _ *Replica, key string) *Delta {
				return kindDelta(b, KindView, Entry{Key: key, Window: idx, Admitted: 1, Prev: others + 1})
			}},
		{name: "view two windows ahead", rule: owned, want: FutureWindow, reject: true, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindView, Entry{Key: key, Window: idx + 2, Admitted: 1})
		}},
		{name: "saved view over it", rule: owned, origin: Origin{Asked: true}, delta: func(_, b, _ *Replica, key string) *Delta {
			return kindDelta(b, KindView, Entry{Key: key, Window: idx, Admitted: 5 * vetCount})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, c := vetTrio(t, tt.rule)
			owner := a.Self()
			if tt.ownedByB {
				owner = b.Self()
			}
			key := keyOwnedBy(t, a, owner)
			// a holds counts of its own, so that a view that changes shows.
			for range 2 {
				if d, err := a.Allow(now, "api", key, 1); err != nil || !d.Allowed {
					t.Fatalf("a's own check: %+v, %v", d, err)
				}
			}
			_, before := a.Table("api").Counts(key, now)
			d := tt.delta(a, b, c, key)
			res, err := a.ReceiveFrom(now, d, tt.origin)
			if err != nil {
				t.Fatal(err)
			}
			_, after := a.Table("api").Counts(key, now)
			if !tt.reject {
				if res.Merged != 1 || res.Rejected != [NumReasons]int{} {
					t.Fatalf("merged %d, rejected %v; want the entry merged", res.Merged, res.Rejected)
				}
				return
			}
			want := [NumReasons]int{}
			want[tt.want] = 1
			if res.Rejected != want || res.Merged != 0 {
				t.Fatalf("merged %d, rejected %v; want it rejected for %v", res.Merged, res.Rejected, tt.want)
			}
			if after != before {
				t.Errorf("a rejected entry changed a's view of %s: %+v, was %+v", key, after, before)
			}
			if res.Reply != nil {
				t.Errorf("a rejected report drew an answer: %+v", res.Reply.Delta)
			}
			// Nothing of it is kept to change a view later: a's next round
			// and the views it sends are what they would have been.
			a.Tick(now + int64(tt.rule.SyncInterval))
			if _, later := a.Table("api").Counts(key, now+int64(tt.rule.SyncInterval)); later != before {
				t.Errorf("after a's next round its view of %s is %+v, was %+v", key, later, before)
			}
			// The sender's next, legitimate delta is merged.
			legit := syncDelta(b, Entry{Key: key, Window: idx, Admitted: 1})
			if tt.rule.Allocation == window.Owner {
				legit.Kind = KindReport
				if tt.ownedByB {
					legit = kindDelta(b, KindAnswer, Entry{Key: key, Window: idx, Admitted: 1, Told: 2})
				}
			}
			if res, err := a.Receive(now, legit); err != nil || res.Merged != 1 {
				t.Errorf("the sender's next delta: merged %d, rejected %v, %v; want it merged", res.Merged, res.Rejected, err)
			}
		})
	}
}

// syncDelta is a full-mesh delta of from's own entries.
func syncDelta(from *Replica, entries ...Entry) *Delta {
	return kindDelta(from, KindSync, entries...)
}

// kindDelta is a delta of kind of from's own entries.
func kindDelta(from *Replica, kind Kind, entries ...Entry) *Delta {
	return &Delta{From: from.Self(), Seq: 1, Kind: kind, Incarnations: []Incarnation{from.Self()},
		Rules: []RuleDelta{{Rule: "api", Entries: entries}}}
}

// relayDelta is a delta of kind from from that passes on entries of
// incarnation of.
func relayDelta(from *Replica, of Incarnation, kind Kind, entries ...Entry) *Delta {
	for i := range entries {
		entries[i].Inc = 1
	}
	return &Delta{From: from.Self(), Seq: 1, Kind: kind, Full: kind == KindSync,
		Incarnations: []Incarnation{from.Self(), of}, Rules: []RuleDelta{{Rule: "api", Entries: entries}}}
}

// TestReceiveRejectsEntriesNotDeltas: a delta with forged entries beside
// right ones merges the right ones; the forged ones change nothing, and an
// incarnation only they name is not learnt.
func TestReceiveRejectsEntriesNotDeltas(t *testing.T) {
	r := rule(vetCount, time.Second, window.Fixed)
	r.Allocation = window.Adaptive
	a, b, c := vetTrio(t, r)
	now := t0 + int64(100*time.Millisecond)
	idx := window.Index(now, time.Second)
	stranger := Incarnation{Node: "z", Boot: 7}
	d := &Delta{From: b.Self(), Seq: 1, Full: true, Incarnations: []Incarnation{b.Self(), c.Self(), stranger},
		Rules: []RuleDelta{{Rule: "api", Entries: []Entry{
			{Key: "x", Window: idx, Inc: 0, Admitted: 3},
			{Key: "x", Window: idx, Inc: 1, Admitted: 4},
			{Key: "y", Window: idx, Inc: 2, Admitted: 1},
			{Key: "y", Window: idx, Inc: 0, Admitted: vetCount + 1},
			{Key: "y", Window: idx + 5, Inc: 0, Admitted: 1},
		}}}}
	known := a.reg.len()
	if !a.Unheard(d) {
		t.Error("Unheard says a has heard of every incarnation the delta names, z among them")
	}
	if k := relayDelta(b, c.Self(), KindSync, Entry{Key: "x", Window: idx, Admitted: 1}); a.Unheard(k) {
		t.Error("Unheard says a has not heard of c, its peer")
	}
	res, err := a.Receive(now, d)
	if err != nil {
		t.Fatal(err)
	}
	want := [NumReasons]int{UnknownIncarnation: 1, OverCount: 1, FutureWindow: 1}
	if res.Merged != 2 || res.Rejected != want {
		t.Fatalf("merged %d, rejected %v; want 2 merged, rejected %v", res.Merged, res.Rejected, want)
	}
	if _, view := a.Table("api").Counts("x", now); view.Curr != 7 {
		t.Errorf("view of x %+v, want b's 3 and c's 4", view)
	}
	if _, view := a.Table("api").Counts("y", now); view != (window.Counts{}) {
		t.Errorf("view of y %+v, want nothing: every entry of it was forged", view)
	}
	if _, ok := a.reg.lookup(stranger); ok || a.reg.len() != known {
		t.Errorf("the registry learnt %v from an unasked delta (%d incarnations, was %d)", stranger, a.reg.len(), known)
	}
}

// TestReceiveAfterLoweredCount: a reload that lowers a rule's count keeps
// its counts, and a peer's counts of the windows admitted under the old
// count are taken up to it; a later window's are held to the new count.
func TestReceiveAfterLoweredCount(t *testing.T) {
	high := rule(2*vetCount, time.Second, window.Fixed)
	high.Allocation = window.Adaptive
	a, b, _ := vetTrio(t, high)
	now := t0 + int64(100*time.Millisecond)
	idx := window.Index(now, time.Second)
	low := high
	low.Count = vetCount
	if err := a.SetRules([]window.Rule{low}, now); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		window   int64
		admitted int64
		reject   bool
	}{
		{"the reload's window, under the old count", idx, 2 * vetCount, false},
		{"the reload's window, over the old count", idx, 2*vetCount + 1, true},
		{"the window before, under the old count", idx - 1, 2 * vetCount, false},
		{"the window after, over the new count", idx + 1, vetCount + 1, true},
		{"the window after, within the new count", idx + 1, vetCount, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := a.Receive(now, syncDelta(b, Entry{Key: fmt.Sprint("k", tt.window, tt.admitted), Window: tt.window, Admitted: tt.admitted}))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Rejected[OverCount] == 1; got != tt.reject || !tt.reject && res.Merged != 1 {
				t.Fatalf("merged %d, rejected %v; want rejected %v", res.Merged, res.Rejected, tt.reject)
			}
		})
	}
	// Two windows on, the old count is of expired windows alone: a reload
	// that lowers the count again holds every window to the counts since.
	later := now + 2*sec
	lower := low
	lower.Count = vetCount / 2
	if err := a.SetRules([]window.Rule{lower}, later); err != nil {
		t.Fatal(err)
	}
	res, err := a.Receive(later, syncDelta(b, Entry{Key: "late", Window: window.Index(later, time.Second), Admitted: vetCount + 1}))
	if err != nil || res.Rejected[OverCount] != 1 {
		t.Fatalf("a count over both later counts: rejected %v, %v; want it rejected", res.Rejected, err)
	}
}

// TestReceiveReplayed: deltas delivered again, late and out of order, change
// no view, whatever their kind: counts merge by maximum, claims by the
// sender's sequence, answers by the report they answer.
func TestReceiveReplayed(t *testing.T) {
	for _, alloc := range []window.Allocation{window.Owner, window.Adaptive, window.Classic} {
		t.Run(alloc.String(), func(t *testing.T) {
			r := rule(100, time.Second, window.Sliding)
			r.SyncInterval = 100 * time.Millisecond
			r.Allocation = alloc
			f := newOwnedFleet(t, 3, r)
			type sent struct {
				to Incarnation
				d  *Delta
			}
			var log []sent
			now := t0
			step := func() {
				now += int64(r.SyncInterval)
				for _, rp := range f.nodes {
					out := rp.Tick(now)
					for len(out) > 0 {
						o := out[0]
						out = out[1:]
						log = append(log, sent{o.To, o.Delta})
						res, err := f.node(o.To).Receive(now, o.Delta)
						if err != nil {
							t.Fatal(err)
						}
						if res.Reply != nil {
							out = append(out, *res.Reply)
						}
					}
				}
			}
			for i := range 12 {
				for n := range f.nodes {
					for k := range 3 {
						f.allow(n, now, fmt.Sprint("k", k), int64(1+(i+n+k)%3))
					}
				}
				step()
			}
			views := func() map[string]window.Counts {
				out := map[string]window.Counts{}
				for n, rp := range f.nodes {
					for k := range 3 {
						key := fmt.Sprint("k", k)
						_, v := rp.Table("api").Counts(key, now)
						out[fmt.Sprint(n, key)] = v
					}
				}
				return out
			}
			want := views()
			if len(log) == 0 || want["0k0"] == (window.Counts{}) {
				t.Fatalf("%d deltas sent, node 0 sees %+v of k0: nothing to replay", len(log), want["0k0"])
			}
			// Everything again, newest first, each delivered twice; the
			// answers replayed reports draw are delivered too.
			for i := len(log) - 1; i >= 0; i-- {
				for range 2 {
					res, err := f.node(log[i].to).Receive(now, log[i].d)
					if err != nil {
						t.Fatal(err)
					}
					if res.Reply != nil {
						if _, err := f.node(res.Reply.To).Receive(now, res.Reply.Delta); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if got := views(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("replayed deltas changed views:\n got %v\nwant %v", got, want)
			}
		})
	}
}
