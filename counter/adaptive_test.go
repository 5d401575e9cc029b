package counter

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// In a fixed window, adaptive nodes say what each will spend of the next
// window before its first sync there. Before any sync in a fresh window the
// fleet admits no more than the count, and a busy node may take more than
// an equal share when its peers are quiet.
func TestFreshFixedWindowOpenings(t *testing.T) {
	const count = 100
	ru := rule(count, time.Second, window.Fixed)
	ru.Allocation = window.Adaptive
	ru.SyncInterval = 200 * time.Millisecond
	names := []string{"a", "b", "c", "d"}
	rs := make([]*Replica, len(names))
	var incs []Incarnation
	for i, n := range names {
		rs[i] = newTestReplica(t, n, ru)
		incs = append(incs, rs[i].Self())
	}
	for i, r := range rs {
		var peers []Incarnation
		for j, inc := range incs {
			if j != i {
				peers = append(peers, inc)
			}
		}
		r.SetPeers(peers)
	}
	// openings holds the latest opening each node announced.
	openings := map[string]int64{}
	round := func(now int64) {
		var sent []Outbound
		for _, r := range rs {
			sent = append(sent, r.Tick(now)...)
		}
		for _, o := range sent {
			for _, rd := range o.Delta.Rules {
				for _, e := range rd.Entries {
					if o.Delta.Incarnations[e.Inc] == o.Delta.From && e.Opens {
						openings[o.Delta.From.Node] = e.Opening
					}
				}
			}
			for _, r := range rs {
				if r.Self() == o.To {
					if _, err := r.Receive(now, o.Delta); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}

	// Window 0: a asks for 12 per interval, the others for 1 each.
	interval := int64(ru.SyncInterval)
	for step := int64(0); step < 4; step++ {
		now := t0 + step*interval + 1
		admitN(t, rs[0], now, 12)
		for _, r := range rs[1:] {
			admitN(t, r, now, 1)
		}
		round(t0 + (step+1)*interval - 1)
	}
	var sum int64
	for _, n := range names {
		o, ok := openings[n]
		if !ok {
			t.Fatalf("%s announced no opening: %v", n, openings)
		}
		sum += o
	}
	t.Logf("openings %v", openings)
	if sum > count {
		t.Errorf("openings %v sum to %d, more than the count %d", openings, sum, count)
	}
	if openings["a"] <= count/int64(len(names)) {
		t.Errorf("busy node a's opening is %d, want more than an equal share %d (%v)", openings["a"], count/len(names), openings)
	}

	// Window 1, before anyone's first sync there: everyone asks for the
	// whole count.
	start := t0 + int64(time.Second) + 1
	total, byNode := 0, map[string]int{}
	for i, r := range rs {
		got := admitN(t, r, start, count)
		byNode[names[i]] = got
		total += got
	}
	t.Logf("admitted %v", byNode)
	if total > count {
		t.Errorf("a fresh window admitted %d before any sync (%v), more than the count %d", total, byNode, count)
	}
	if int64(byNode["a"]) != openings["a"] {
		t.Errorf("a admitted %d of a fresh window before its first sync, want its opening %d", byNode["a"], openings["a"])
	}
}

// In a sliding window, what a node admitted after its last sync decays in
// the next window like everything else, and peers, who counted it as spent
// from the node's claim without seeing it, leave that release to the node:
// it may admit it before its next sync.
func TestSlidingReleaseOfAdmissionsAfterSync(t *testing.T) {
	const after = 40 // admitted in window 0 after the sync
	ru := rule(1000, time.Second, window.Sliding)
	ru.Allocation = window.Adaptive
	ru.SyncInterval = 500 * time.Millisecond
	// more returns how many more hits a admits at mid-window 1, having
	// admitted n hits in window 0 after its sync there.
	more := func(n int) int {
		a, b := newTestReplica(t, "a", ru), newTestReplica(t, "b", ru)
		a.SetPeers([]Incarnation{b.Self()})
		b.SetPeers([]Incarnation{a.Self()})
		for _, r := range []*Replica{a, b} {
			for range 100 { // a need of 100 per interval each
				if _, err := r.Allow(t0+1, "api", "k", 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		sync := t0 + 400*int64(time.Millisecond)
		for _, pair := range [][2]*Replica{{a, b}, {b, a}} {
			for _, o := range pair[0].Tick(sync) {
				if _, err := pair[1].Receive(sync, o.Delta); err != nil {
					t.Fatal(err)
				}
			}
		}
		for range n {
			if d, err := a.Allow(sync+1, "api", "k", 1); err != nil || !d.Allowed {
				t.Fatalf("admitting %d after the sync: %+v, %v", n, d, err)
			}
		}
		admitted := 0
		for ; admitted < 10000; admitted++ {
			d, err := a.Allow(t0+1500*int64(time.Millisecond), "api", "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				break
			}
		}
		return admitted
	}
	without, with := more(0), more(after)
	// Spent counts against the claim; half of it has decayed by mid-window.
	want := without - after + after/2
	t.Logf("mid-window 1: %d more without admissions after the sync, %d after %d of them (want %d ± 1)", without, with, after, want)
	if with < want-1 || with > want+1 {
		t.Errorf("admitted %d more, want %d ± 1", with, want)
	}
}

// releaseShare is the share of released sliding-window budget that r gave
// itself for key at its last sync.
func releaseShare(t *testing.T, r *Replica, key string) float64 {
	t.Helper()
	tb := r.Table("api")
	sh, h := tb.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(key, h)
	if s == nil || s.x == nil {
		t.Fatalf("%s holds no shared state for %q", r.Self().Node, key)
	}
	return s.x.alloc.share
}

// Release shares are worked out from announced needs, so that they add up
// to one even when a node's need moves by less than it announces.
func TestReleaseSharesAddUpToOne(t *testing.T) {
	ru := rule(1000, time.Second, window.Sliding)
	ru.Allocation = window.Adaptive
	ru.SyncInterval = 100 * time.Millisecond
	a, b := newTestReplica(t, "a", ru), newTestReplica(t, "b", ru)
	a.SetPeers([]Incarnation{b.Self()})
	b.SetPeers([]Incarnation{a.Self()})
	interval := int64(ru.SyncInterval)
	// a's demand per interval wanders within an eighth of 40; b's holds at 40.
	for i, aDemand := range []int{40, 44, 37, 43, 36, 40, 44} {
		now := t0 + int64(i)*interval
		for _, d := range []struct {
			r *Replica
			n int
		}{{a, aDemand}, {b, 40}} {
			for range d.n {
				if _, err := d.r.Allow(now+1, "api", "k", 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		sync := now + interval - 1
		var sent []Outbound
		for _, r := range []*Replica{a, b} {
			sent = append(sent, r.Tick(sync)...)
		}
		for _, o := range sent {
			to := a
			if o.To == b.Self() {
				to = b
			}
			if _, err := to.Receive(sync, o.Delta); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 {
			continue // the first round announces; shares settle from the second
		}
		if sum := releaseShare(t, a, "k") + releaseShare(t, b, "k"); sum > 1+1e-9 {
			t.Errorf("round %d (a's demand %d): shares add up to %.4f, more than one", i, aDemand, sum)
		}
	}
}

// Two nodes that sync at the same moment claim from the same unclaimed
// budget, each without the other's claim. When their news crosses, the one
// that sorts later gives back what the pool can no longer hold, so that
// together they can admit no more than is left.
func TestCrossedClaimsShareThePool(t *testing.T) {
	const count = 1000
	ru := rule(count, 10*time.Second, window.Fixed)
	ru.Allocation = window.Adaptive
	ru.SyncInterval = time.Second
	a, b := newTestReplica(t, "a", ru), newTestReplica(t, "b", ru)
	a.SetPeers([]Incarnation{b.Self()})
	b.SetPeers([]Incarnation{a.Self()})
	// Both ask for a lot, sync at the same moment, and only then hear of
	// each other: their claims cross.
	used := admitN(t, a, t0+1, 100) + admitN(t, b, t0+1, 100)
	for step := int64(1); step <= 9; step++ {
		sync := t0 + step*sec
		da, db := a.Tick(sync), b.Tick(sync)
		for _, o := range da {
			if _, err := b.Receive(sync+1, o.Delta); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range db {
			if _, err := a.Receive(sync+1, o.Delta); err != nil {
				t.Fatal(err)
			}
		}
		// Until the next sync, each admits what its claim allows.
		gotA, gotB := admitN(t, a, sync+2, 150), admitN(t, b, sync+2, 150)
		used += gotA + gotB
		t.Logf("round %d: a admitted %d, b %d; %d of %d in the window", step, gotA, gotB, used, count)
	}
	if used > count {
		t.Errorf("the window admitted %d, more than the count %d", used, count)
	}
}

// admitN asks r for n single hits on key "k" of rule "api" at now and
// returns how many it admitted.
func admitN(t *testing.T, r *Replica, now int64, n int) int {
	t.Helper()
	got := 0
	for range n {
		d, err := r.Allow(now, "api", "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	return got
}
