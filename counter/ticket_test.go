package counter

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/window"
)

// TestRefund checks, on a lone node, what a refund gives back and when:
// within the window the hits were counted in (a fixed window) or the one
// after it (a sliding window, whose estimate they still weigh on), once,
// and never for a removed rule, one whose window changed or one a reload
// turned strict. A strict rule's hits this replica counted itself (a
// strict log's state machine, a fail-local answer) are given back.
func TestRefund(t *testing.T) {
	fixed := window.Rule{Name: "api", Count: 3, Window: time.Minute, Type: window.Fixed, SyncInterval: 200 * time.Millisecond}
	sliding := fixed
	sliding.Type = window.Sliding
	strict := fixed
	strict.SyncInterval = window.Strict
	start := t0 + 10*sec // 10 s into a minute
	min := int64(time.Minute)
	for _, tc := range []struct {
		name string
		rule window.Rule
		// reload, if set, replaces the rule between the reservation and
		// the refund.
		reload   []window.Rule
		refundAt int64
		want     int64
		// after is whether 3 more hits fit after the refund, at refundAt.
		after bool
	}{
		{"fixed, same window", fixed, nil, start + 30*sec, 2, true},
		{"fixed, last moment of the window", fixed, nil, t0 + min - 1, 2, true},
		{"fixed, next window", fixed, nil, t0 + min, 0, true},
		{"sliding, same window", sliding, nil, start + 30*sec, 2, true},
		{"sliding, next window", sliding, nil, t0 + min + 30*sec, 2, true},
		{"sliding, two windows on", sliding, nil, t0 + 2*min, 0, true},
		{"count raised by a reload", fixed, []window.Rule{{Name: "api", Count: 5, Window: time.Minute, Type: window.Fixed,
			SyncInterval: time.Second}}, start + sec, 2, true},
		{"window changed by a reload", fixed, []window.Rule{{Name: "api", Count: 3, Window: 2 * time.Minute, Type: window.Fixed,
			SyncInterval: time.Second}}, start + sec, 0, false},
		{"rule removed", fixed, []window.Rule{{Name: "other", Count: 3, Window: time.Minute}}, start + sec, 0, false},
		{"turned strict by a reload", fixed, []window.Rule{strict}, start + sec, 0, false},
		{"strict rule", strict, nil, start + sec, 2, true},
		{"strict rule turned batched by a reload", strict, []window.Rule{fixed}, start + sec, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := newTestReplica(t, "a", tc.rule)
			d, tk, err := rp.Reserve(start, "api", "k", 2)
			if err != nil || !d.Allowed {
				t.Fatalf("reserving 2 of 3: %+v, %v", d, err)
			}
			if tk.Window != window.Index(start, time.Minute) || tk.Hits != 2 || tk.Key != "k" || tk.Rule != "api" {
				t.Fatalf("ticket %+v, want 2 hits of api/k in window %d", tk, window.Index(start, time.Minute))
			}
			if tc.reload != nil {
				if err := rp.SetRules(tc.reload, start); err != nil {
					t.Fatal(err)
				}
			}
			if got := rp.Refund(&tk, tc.refundAt); got != tc.want {
				t.Fatalf("refund gave back %d, want %d", got, tc.want)
			}
			if tk.Counted() {
				t.Fatalf("a refunded ticket still holds %d hits", tk.Hits)
			}
			if got := rp.Refund(&tk, tc.refundAt); got != 0 {
				t.Fatalf("refunding the emptied ticket again gave back %d", got)
			}
			if tc.after {
				if d, _ := rp.Allow(tc.refundAt, "api", "k", 3); !d.Allowed {
					t.Fatalf("after the refund 3 hits were refused: %+v", d)
				}
			}
			if tb := rp.Table(tc.rule.Name); tb != nil {
				own, view := tb.Counts("k", tc.refundAt)
				if own.Prev < 0 || own.Curr < 0 || view.Prev < 0 || view.Curr < 0 {
					t.Fatalf("counts went negative: own %+v, view %+v", own, view)
				}
			}
		})
	}
}

// TestRefundTicketOnlyForCountedHits checks that a refusal and a check of
// 0 hits count nothing, so their tickets give nothing back.
func TestRefundTicketOnlyForCountedHits(t *testing.T) {
	rule := window.Rule{Name: "api", Count: 2, Window: time.Minute, Type: window.Fixed, SyncInterval: time.Second}
	rp := newTestReplica(t, "a", rule)
	now := t0 + sec
	if _, tk, _ := rp.Reserve(now, "api", "k", 2); !tk.Counted() {
		t.Fatal("an admission of 2 hits counted nothing")
	}
	for _, hits := range []int64{1, 0} {
		d, tk, err := rp.Reserve(now, "api", "k", hits)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Counted() {
			t.Fatalf("%d hits, allowed=%v: the ticket holds %d hits", hits, d.Allowed, tk.Hits)
		}
		if got := rp.Refund(&tk, now); got != 0 {
			t.Fatalf("%d hits: refund gave back %d", hits, got)
		}
	}
}

// TestRefundNeverOverAdmits checks, over random reservations and refunds on
// a lone node, fixed and sliding windows: a refund gives back all of its
// hits while the window holds them and nothing after; the node's counts
// are always what was admitted less what was given back, never negative;
// and no admission takes the window past its count, counting only hits not
// given back, as one exact limiter would.
func TestRefundNeverOverAdmits(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rule := window.Rule{Name: "api", Count: rapid.Int64Range(1, 20).Draw(rt, "count"), Window: time.Second,
			Type: rapid.SampledFrom([]window.Type{window.Fixed, window.Sliding}).Draw(rt, "type"), SyncInterval: 100 * time.Millisecond}
		rp := loneReplica(rt, rule)
		tb := rp.Table("api")
		now := t0 + rapid.Int64Range(0, sec).Draw(rt, "start")
		net := map[int64]int64{} // hits admitted less given back, by window
		var tickets []Ticket
		for step := range rapid.IntRange(1, 200).Draw(rt, "steps") {
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0:
				now += rapid.Int64Range(0, sec/2).Draw(rt, "advance")
			case 1:
				hits := rapid.Int64Range(1, rule.Count).Draw(rt, "hits")
				idx, elapsed := window.Position(now, rule.Window)
				before := window.Counts{Prev: net[idx-1], Curr: net[idx]}
				if rule.Type == window.Fixed {
					before.Prev = 0
				}
				exact := rule.DecideAt(before, elapsed, hits)
				d, tk, err := rp.Reserve(now, "api", "k", hits)
				if err != nil {
					rt.Fatal(err)
				}
				if d.Allowed != exact.Allowed {
					rt.Fatalf("step %d: %d hits allowed=%v with %+v not given back; one exact limiter says %v",
						step, hits, d.Allowed, before, exact.Allowed)
				}
				if d.Allowed {
					net[idx] += hits
					tickets = append(tickets, tk)
				}
			case 2:
				if len(tickets) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(tickets)-1).Draw(rt, "ticket")
				tk := &tickets[i]
				hits := tk.Hits
				idx := window.Index(now, rule.Window)
				holds := hits > 0 && (tk.Window == idx || rule.Type == window.Sliding && tk.Window == idx-1)
				got := rp.Refund(tk, now)
				if holds && got != hits || !holds && got != 0 {
					rt.Fatalf("step %d: refund of %d hits of window %d at window %d gave back %d", step, hits, tk.Window, idx, got)
				}
				net[tk.Window] -= got
			}
			idx := window.Index(now, rule.Window)
			own, _ := tb.Counts("k", now)
			want := window.Counts{Prev: net[idx-1], Curr: net[idx]}
			if own != want {
				rt.Fatalf("step %d: counts %+v, want %+v admitted less given back", step, own, want)
			}
			if own.Prev < 0 || own.Curr < 0 || own.Curr > rule.Count || own.Prev > rule.Count {
				rt.Fatalf("step %d: counts %+v out of [0, %d]", step, own, rule.Count)
			}
		}
	})
}

// TestRefundCopiesNeverGoNegative checks that tickets refunded any number
// of times, copies included, never take a key's counts below zero.
func TestRefundCopiesNeverGoNegative(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rule := window.Rule{Name: "api", Count: rapid.Int64Range(1, 20).Draw(rt, "count"), Window: time.Second,
			Type: rapid.SampledFrom([]window.Type{window.Fixed, window.Sliding}).Draw(rt, "type"), SyncInterval: 100 * time.Millisecond}
		rp := loneReplica(rt, rule)
		now := t0
		var tickets []Ticket
		for step := range rapid.IntRange(1, 100).Draw(rt, "steps") {
			now += rapid.Int64Range(0, sec/4).Draw(rt, "advance")
			if rapid.Bool().Draw(rt, "reserve") {
				_, tk, err := rp.Reserve(now, "api", "k", rapid.Int64Range(1, rule.Count).Draw(rt, "hits"))
				if err != nil {
					rt.Fatal(err)
				}
				if tk.Counted() {
					tickets = append(tickets, tk)
				}
			} else if len(tickets) > 0 {
				copied := tickets[rapid.IntRange(0, len(tickets)-1).Draw(rt, "ticket")]
				if got := rp.Refund(&copied, now); got < 0 || got > copied.Hits && copied.Hits != 0 {
					rt.Fatalf("step %d: refund gave back %d", step, got)
				}
			}
			own, view := rp.Table("api").Counts("k", now)
			if own.Prev < 0 || own.Curr < 0 || view.Prev < 0 || view.Curr < 0 {
				rt.Fatalf("step %d: counts went negative: own %+v, view %+v", step, own, view)
			}
		}
	})
}

// TestRefundAllocation checks that on a clustered key a refund gives the
// hits back to the allocation's spending too, under adaptive and classic
// allocation, until a sync starts that spending afresh.
func TestRefundAllocation(t *testing.T) {
	for _, alloc := range []window.Allocation{window.Adaptive, window.Classic} {
		t.Run(alloc.String(), func(t *testing.T) {
			rule := window.Rule{Name: "api", Count: 100, Window: time.Minute, Type: window.Fixed,
				SyncInterval: time.Second, Allocation: alloc}
			a, b := newTestReplica(t, "a", rule), newTestReplica(t, "b", rule)
			for _, rp := range []*Replica{a, b} {
				rp.SetPeers([]Incarnation{a.Self(), b.Self()})
			}
			now := t0 + sec
			deliver := func() {
				for _, from := range []*Replica{a, b} {
					for _, o := range from.Tick(now) {
						to := a
						if o.To == b.Self() {
							to = b
						}
						if _, err := to.Receive(now, o.Delta); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			deliver()
			now += 2 * sec
			deliver()
			// Spend a's budget to the last hit, then give some back: the
			// same hits fit again, and no more.
			var tk Ticket
			spent := int64(0)
			for {
				d, got, err := a.Reserve(now, "api", "k", 1)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					break
				}
				spent++
				tk = got
			}
			if spent == 0 {
				t.Fatal("a admitted nothing")
			}
			if got := a.Refund(&tk, now); got != 1 {
				t.Fatalf("refund gave back %d, want 1", got)
			}
			if d, _ := a.Allow(now, "api", "k", 1); !d.Allowed {
				t.Fatalf("the hit given back was refused again: %+v", d)
			}
			if d, _ := a.Allow(now, "api", "k", 1); d.Allowed {
				t.Fatal("a hit past the budget was admitted after a refund of one")
			}
			// After a sync the spending starts afresh: a ticket from
			// before it gives back only the node's count.
			_, tk, _ = a.Reserve(now, "api", "k2", 1)
			if !tk.Counted() {
				t.Skip("no budget for a second key")
			}
			now += 2 * sec
			deliver()
			before := spentOf(a.Table("api"), "k2")
			if got := a.Refund(&tk, now); got != 1 {
				t.Fatalf("refund after a sync gave back %d, want 1", got)
			}
			if after := spentOf(a.Table("api"), "k2"); after != before {
				t.Fatalf("refund after a sync changed the spending since it from %d to %d", before, after)
			}
		})
	}
}

// spentOf is what the allocation of key has counted spent since its last
// sync.
func spentOf(t *Table, key string) int64 {
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(key, h)
	if s == nil || s.x == nil {
		return 0
	}
	return s.x.alloc.spent
}

// loneReplica is a replica of rule alone, for a property test.
func loneReplica(t failer, rule window.Rule) *Replica {
	r, err := NewReplica(Config{Self: Incarnation{Node: "a", Boot: 1}, Rules: []window.Rule{rule}, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
