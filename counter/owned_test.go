package counter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/window"
)

// ownedFleet is replicas of one owner-allocated rule that hand each other
// messages at once, in order.
type ownedFleet struct {
	t     *testing.T
	nodes []*Replica
	down  map[string]bool // nodes whose messages are lost
}

func newOwnedFleet(t *testing.T, n int, r window.Rule) *ownedFleet {
	f := &ownedFleet{t: t, down: map[string]bool{}}
	var incs []Incarnation
	for i := range n {
		rp := newTestReplica(t, string(rune('a'+i)), r)
		f.nodes = append(f.nodes, rp)
		incs = append(incs, rp.Self())
	}
	for _, rp := range f.nodes {
		rp.SetPeers(incs)
	}
	return f
}

func (f *ownedFleet) node(inc Incarnation) *Replica {
	for _, rp := range f.nodes {
		if rp.Self() == inc {
			return rp
		}
	}
	return nil
}

// deliver hands out messages and the replies they draw; it returns whether
// every one arrived.
func (f *ownedFleet) deliver(now int64, out []Outbound) bool {
	all := true
	for len(out) > 0 {
		o := out[0]
		out = out[1:]
		to := f.node(o.To)
		if to == nil || f.down[o.To.Node] || f.down[o.Delta.From.Node] {
			all = false
			continue
		}
		if from := f.node(o.Delta.From); from != nil && to.Unheard(o.Delta) {
			// As a node does, it pulls the sender's state for the
			// incarnations it had not heard of.
			if _, err := to.ReceiveFrom(now, from.Snapshot(now), Origin{Asked: true}); err != nil {
				f.t.Fatalf("%s pulling from %s: %v", o.To.Node, o.Delta.From.Node, err)
			}
		}
		res, err := to.Receive(now, o.Delta)
		if err != nil {
			f.t.Fatalf("%s receiving from %s: %v", o.To.Node, o.Delta.From.Node, err)
		}
		if res.Reply != nil {
			out = append(out, *res.Reply)
		}
	}
	return all
}

// allow is a check as a node embedding the replica makes it: asking the
// owner where Decide says to, and settling on the answer or its absence.
func (f *ownedFleet) allow(i int, now int64, key string, hits int64) window.Decision {
	rp := f.nodes[i]
	d, ask, err := rp.Decide(now, "api", key, hits, 0, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if ask == nil {
		return d
	}
	outcome := Answered
	if !f.deliver(now, []Outbound{*ask}) {
		outcome = Lost
	}
	if d, err = rp.Settle(now, "api", key, hits, outcome, nil); err != nil {
		f.t.Fatal(err)
	}
	return d
}

func (f *ownedFleet) tick(now int64) {
	for _, rp := range f.nodes {
		f.deliver(now, rp.Tick(now))
	}
}

// ownerIndex is the index of key's owner as node 0 sees it.
func (f *ownedFleet) ownerIndex(key string) int {
	t := f.nodes[0].Table("api")
	inc := f.nodes[0].reg.inc(t.fleet.Load().ownerOf(key))
	for i, rp := range f.nodes {
		if rp.Self() == inc {
			return i
		}
	}
	f.t.Fatalf("owner %v of %q is no node", inc, key)
	return -1
}

func ownedRule(count int64, w time.Duration, typ window.Type) window.Rule {
	r := rule(count, w, typ)
	r.SyncInterval = 100 * time.Millisecond
	r.Allocation = window.Owner
	return r
}

// TestOwnedSmallCountIsExact checks that a small count spread over a fleet
// admits what one exact limiter admits, whichever node each check reaches,
// that Remaining is the fleet's, and that a refusal waits until the fleet
// has room.
func TestOwnedSmallCountIsExact(t *testing.T) {
	for _, typ := range []window.Type{window.Fixed, window.Sliding} {
		t.Run(typ.String(), func(t *testing.T) {
			f := newOwnedFleet(t, 3, ownedRule(5, time.Minute, typ))
			ref := window.Rule{Count: 5, Window: time.Minute, Type: typ}
			admitted := map[int64]int64{} // one exact limiter's count per window
			for i := range 24 {
				// Checks 7 s apart over three windows, so that a sliding
				// window's decay decides some of them.
				now := t0 + int64(i)*7*sec
				idx, elapsed := window.Position(now, ref.Window)
				d := f.allow(i%3, now, "alice", 1)
				want := ref.DecideAt(window.Counts{Prev: admitted[idx-1], Curr: admitted[idx]}, elapsed, 1)
				if want.Allowed {
					admitted[idx]++
				}
				if d.Allowed != want.Allowed || d.Remaining != want.Remaining {
					t.Fatalf("check %d on node %d: %+v, one exact limiter: %+v", i+1, i%3, d, want)
				}
				if !d.Allowed && d.RetryAfter != want.RetryAfter {
					t.Fatalf("check %d on node %d: retry after %v, one exact limiter: %v", i+1, i%3, d.RetryAfter, want.RetryAfter)
				}
				if i%4 == 3 {
					f.tick(now)
				}
			}
		})
	}
}

// leaseOf returns a copy of what node r holds for key under owner
// allocation.
func leaseOf(r *Replica, key string) owned {
	t := r.Table("api")
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s := sh.lookup(key, h); s != nil && s.owned() != nil {
		return *s.owned()
	}
	return owned{}
}

// TestOwnedOwnerUnreachable checks that a node whose owner does not answer
// decides from its own view, within its grant and its share of what the
// fleet had left when it last heard, so that the nodes that lost the owner
// together admit no more than that.
func TestOwnedOwnerUnreachable(t *testing.T) {
	f := newOwnedFleet(t, 3, ownedRule(60, time.Minute, window.Fixed))
	own := f.ownerIndex("bob")
	other := (own + 1) % 3
	for i := range 30 {
		if d := f.allow(own, t0+int64(i)*sec/10, "bob", 1); !d.Allowed {
			t.Fatalf("check %d on the owner: %+v", i+1, d)
		}
	}
	for i := range 6 {
		if d := f.allow(other, t0+5*sec+int64(i), "bob", 1); !d.Allowed {
			t.Fatalf("check %d on node %d with 30 of 60 spent: %+v", i+1, other, d)
		}
	}
	l := leaseOf(f.nodes[other], "bob")
	if l.others[1] != 30 {
		t.Fatalf("node %d heard the others admitted %d, want 30", other, l.others[1])
	}
	grant := l.grant
	f.down[f.nodes[own].Self().Node] = true
	admitted := int64(0)
	for i := range 30 {
		if d := f.allow(other, t0+int64(6+i)*sec, "bob", 1); d.Allowed {
			admitted++
		}
	}
	// Its share is a third of what was left when it last heard, its grant
	// counted as spent.
	left := 60 - 30 - grant
	if most := grant - 6 + left/3; admitted < 1 || admitted > most {
		t.Fatalf("with the owner unreachable node %d admitted %d, want 1 … %d (its grant's %d left and a third of the %d left)",
			other, admitted, most, grant-6, left)
	}
}

// TestOwnedUnansweredRefusalIsHonest checks what a node answers when its
// question to the key's owner went unanswered: the room its view shows may
// be granted to others, so Remaining is what it may admit alone (in a
// refusal fewer than the hits asked), never its view's room, and a
// refusal's RetryAfter is positive.
func TestOwnedUnansweredRefusalIsHonest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome Outcome
		hits    int64 // lost, its share is a third of the 10 it sees free
		// admit says the hits fit its share, with at most remaining left
		// of it; otherwise they are refused.
		admit     bool
		remaining int64
	}{{"late", Late, 1, false, 0}, {"lost", Lost, 4, false, 0}, {"lost-within-share", Lost, 1, true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOwnedFleet(t, 3, ownedRule(10, time.Minute, window.Fixed))
			own := f.ownerIndex("login")
			a, b := (own+1)%3, (own+2)%3
			for i := range 8 {
				if d := f.allow([]int{own, a}[i%2], t0+int64(i)*sec, "login", 1); !d.Allowed {
					t.Fatalf("check %d: %+v", i+1, d)
				}
			}
			f.down[f.nodes[own].Self().Node] = true
			// Node b has never heard of the key: its view shows the whole
			// count free, and it holds no grant.
			now := t0 + 9*sec
			d, ask, err := f.nodes[b].Decide(now, "api", "login", tc.hits, 0, nil)
			if err != nil || ask == nil {
				t.Fatalf("node %d with no grant decided %+v without asking (%v)", b, d, err)
			}
			if d, err = f.nodes[b].Settle(now, "api", "login", tc.hits, tc.outcome, nil); err != nil {
				t.Fatal(err)
			}
			if tc.admit {
				if !d.Allowed || d.Remaining > tc.remaining {
					t.Fatalf("%d hits unanswered (%s): %+v; want admitted with at most %d remaining, what is left of its share",
						tc.hits, tc.name, d, tc.remaining)
				}
				return
			}
			if d.Allowed || d.Remaining >= tc.hits || d.RetryAfter <= 0 {
				t.Fatalf("%d hits unanswered (%s): %+v; want a refusal with remaining < %d and a positive wait",
					tc.hits, tc.name, d, tc.hits)
			}
		})
	}
}

// TestOwnedMoveKeepsCounts checks that when a key's owner leaves, the new
// owner learns what the remaining nodes admitted from their next reports.
func TestOwnedMoveKeepsCounts(t *testing.T) {
	const key = "carol"
	f := newOwnedFleet(t, 3, ownedRule(6, time.Minute, window.Fixed))
	own := f.ownerIndex(key)
	a, b := (own+1)%3, (own+2)%3
	for i := range 4 {
		if d := f.allow([]int{a, b}[i%2], t0+int64(i)*sec, key, 1); !d.Allowed {
			t.Fatalf("check %d: %+v", i+1, d)
		}
	}
	// The owner leaves: a and b see a two-node fleet, one of them owning
	// the key now.
	left := []Incarnation{f.nodes[a].Self(), f.nodes[b].Self()}
	f.nodes[a].SetPeers(left)
	f.nodes[b].SetPeers(left)
	f.down[f.nodes[own].Self().Node] = true
	now := t0 + 10*sec
	f.tick(now)
	f.tick(now + int64(200*time.Millisecond))
	admitted := 0
	for i := range 6 {
		if d := f.allow([]int{a, b}[i%2], now+int64(i+1)*sec, key, 1); d.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("after the owner left, %d more admitted with 4 of 6 spent, want 2", admitted)
	}
}

// drawnRun is a fleet, a rule and a latency drawn for a property test of
// owner allocation.
type drawnRun struct {
	n       int
	r       window.Rule
	latency time.Duration
}

// drawRun draws 2 to maxNodes nodes, a count of 1 to maxCount, a window of
// 1 or 10 s, fixed or sliding, a sync interval of 50 to 500 ms and a
// latency up to it.
func drawRun(rt *rapid.T, maxNodes int, maxCount int64) drawnRun {
	n := rapid.IntRange(2, maxNodes).Draw(rt, "nodes")
	w := rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Second}).Draw(rt, "window")
	r := window.Rule{Name: "api", Count: rapid.Int64Range(1, maxCount).Draw(rt, "count"), Window: w,
		Type:         rapid.SampledFrom([]window.Type{window.Fixed, window.Sliding}).Draw(rt, "type"),
		SyncInterval: time.Duration(rapid.IntRange(1, 10).Draw(rt, "sync50ms")) * 50 * time.Millisecond}
	latency := time.Duration(rapid.Int64Range(0, int64(r.SyncInterval)).Draw(rt, "latency"))
	return drawnRun{n: n, r: r, latency: latency}
}

// keyOwned returns a key that node owner owns with node standby its
// standby, as node 0 sees the fleet.
func (f *ownedFleet) keyOwned(owner, standby int) string {
	f.t.Helper()
	tb := f.nodes[0].Table("api")
	for k := range 1000 {
		key := fmt.Sprint("key-", k)
		o, sb := tb.fleet.Load().rank(key)
		if f.nodes[0].reg.inc(o) == f.nodes[owner].Self() && f.nodes[0].reg.inc(sb) == f.nodes[standby].Self() {
			return key
		}
	}
	f.t.Fatalf("no key owned by node %d with node %d its standby", owner, standby)
	return ""
}

// keyRun drives one key of an owned fleet on a clock that each tick moves
// on by the rule's 100 ms sync interval.
type keyRun struct {
	f   *ownedFleet
	key string
	now int64
}

// ticks runs n sync rounds.
func (k *keyRun) ticks(n int) {
	for range n {
		k.now += int64(100 * time.Millisecond)
		k.f.tick(k.now)
	}
}

// admit checks n single hits of the key on node i, each of which must be
// admitted.
func (k *keyRun) admit(i, n int) {
	k.f.t.Helper()
	for range n {
		if d := k.f.allow(i, k.now, k.key, 1); !d.Allowed {
			k.f.t.Fatalf("node %d refused: %+v", i, d)
		}
	}
}

// TestOwnedNeverOvershoots checks, over fleets of 2 to 16 nodes, counts of
// 1 to 600, fixed and sliding windows, sync intervals from 50 to 500 ms,
// latencies up to the sync interval, and demand from half the limit to six
// times it spread unevenly over a few keys, that the fleet never admits a
// check that one exact limiter, counting everything the fleet admitted,
// would refuse.
func TestOwnedNeverOvershoots(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		run := drawRun(rt, 16, 600)
		n, r, w, latency := run.n, run.r, run.r.Window, run.latency
		load := rapid.Float64Range(0.5, 6).Draw(rt, "load")
		keys := rapid.IntRange(1, 3).Draw(rt, "keys")
		seed := rapid.Uint64().Draw(rt, "seed")
		s := newNetSim(rt, n, r, latency, t0, seed)
		rng := rand.New(rand.NewPCG(seed, 11))
		checks := int(load * float64(r.Count) * 3)
		span := 3 * int64(w)
		for range min(checks, 3_000) {
			// Uneven: node i gets about twice the share of node i+1.
			node := min(int(rng.ExpFloat64()*float64(n)/3), n-1)
			s.check(t0+rng.Int64N(span), node, fmt.Sprintf("k%d", rng.IntN(keys)))
		}
		s.run(t0 + span)
		if s.over != "" {
			rt.Fatal(s.over)
		}
	})
}

// TestOwnedRefundsNeverOvershoot is TestOwnedNeverOvershoots with hits
// given back: a share of the admissions is refunded, at once or up to two
// windows later, on the node that admitted it, and the fleet still never
// admits a check that one exact limiter, counting what the fleet admitted
// less what it gave back, would refuse.
func TestOwnedRefundsNeverOvershoot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		run := drawRun(rt, 8, 300)
		n, r, w, latency := run.n, run.r, run.r.Window, run.latency
		load := rapid.Float64Range(1, 6).Draw(rt, "load")
		share := rapid.Float64Range(0.1, 0.9).Draw(rt, "refunded")
		keys := rapid.IntRange(1, 3).Draw(rt, "keys")
		seed := rapid.Uint64().Draw(rt, "seed")
		s := newNetSim(rt, n, r, latency, t0, seed)
		rng := rand.New(rand.NewPCG(seed, 13))
		s.refundAfter = func() (time.Duration, bool) {
			return time.Duration(rng.Int64N(2 * int64(w))), rng.Float64() < share
		}
		checks := int(load * float64(r.Count) * 3)
		span := 3 * int64(w)
		for range min(checks, 3_000) {
			node := min(int(rng.ExpFloat64()*float64(n)/3), n-1)
			s.check(t0+rng.Int64N(span), node, fmt.Sprintf("k%d", rng.IntN(keys)))
		}
		s.run(t0 + span)
		if s.over != "" {
			rt.Fatalf("%s (%d hits given back)", s.over, s.refunded)
		}
	})
}

// TestOwnedPartitionHealCountsOnce checks that a key's counts are counted
// once everywhere after its owner is cut off, its standby takes over, and
// the owner comes back: the standby hands back what it held and keeps no
// second copy of what the owner then tells it.
func TestOwnedPartitionHealCountsOnce(t *testing.T) {
	f := newOwnedFleet(t, 3, ownedRule(100, time.Minute, window.Fixed))
	k := &keyRun{f: f, key: f.keyOwned(1, 0), now: t0 + sec}
	k.admit(1, 5)
	k.admit(2, 3)
	k.admit(0, 2)
	k.ticks(1)
	k.ticks(1)
	// Node 1 is cut off: nodes 0 and 2 see each other only.
	all := []Incarnation{f.nodes[0].Self(), f.nodes[1].Self(), f.nodes[2].Self()}
	f.nodes[0].SetPeers([]Incarnation{all[0], all[2]})
	f.nodes[2].SetPeers([]Incarnation{all[0], all[2]})
	f.nodes[1].SetPeers([]Incarnation{all[1]})
	f.down[all[1].Node] = true
	k.ticks(1)
	k.ticks(1)
	k.admit(2, 1)
	k.ticks(1)
	// Healed.
	for _, rp := range f.nodes {
		rp.SetPeers(all)
	}
	f.down[all[1].Node] = false
	k.ticks(1)
	k.ticks(1)
	// The owner, back, admits more: its standby hears of it.
	k.admit(1, 1)
	for range 6 {
		k.ticks(1)
	}
	for i, rp := range f.nodes {
		if _, view := rp.Table("api").Counts(k.key, k.now); view.Curr != 12 {
			t.Errorf("node %d sees %d admitted, want the 12 admitted", i, view.Curr)
		}
	}
}

// TestBookSumsMatchAWalk checks, over a fleet large enough that owners
// keep running sums, that the sums always equal a fresh walk over the
// accounts, whatever the traffic and the latency.
func TestBookSumsMatchAWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(bigBook+2, bigBook+8).Draw(rt, "nodes")
		r := window.Rule{Name: "api", Count: rapid.Int64Range(1, 100_000).Draw(rt, "count"), Window: time.Second,
			Type:         rapid.SampledFrom([]window.Type{window.Fixed, window.Sliding}).Draw(rt, "type"),
			SyncInterval: 100 * time.Millisecond}
		seed := rapid.Uint64().Draw(rt, "seed")
		s := newNetSim(rt, n, r, time.Duration(rapid.Int64Range(0, int64(50*time.Millisecond)).Draw(rt, "latency")), t0, seed)
		rng := rand.New(rand.NewPCG(seed, 3))
		for range 3000 {
			s.check(t0+rng.Int64N(3*sec), rng.IntN(n), fmt.Sprint("k", rng.IntN(3)))
		}
		for at := t0; at < t0+3*sec; at += 50 * int64(time.Millisecond) {
			s.run(at)
			for i, rp := range s.nodes {
				tb := rp.Table("api")
				for j := range tb.shards {
					sh := &tb.shards[j]
					sh.mu.Lock()
					for k := range sh.slots {
						o := sh.slots[k].owned()
						if o == nil || o.bookOf() == nil || o.bookOf().agg == nil || !o.bookOf().agg.valid {
							continue
						}
						b := o.bookOf()
						got := *b.agg
						b.stale()
						want := *b.sums(got.open)
						got.live, want.live, got.liveGen, want.liveGen = 0, 0, 0, 0
						if got != want {
							sh.mu.Unlock()
							rt.Fatalf("node %d key %q at %v: sums %+v, a walk gives %+v", i, sh.slots[k].key, time.Duration(at-t0), got, want)
						}
					}
					sh.mu.Unlock()
				}
			}
		}
	})
}

// TestStandbyCopyCountsOnce checks that a key's standby, holding a copy of
// its owner's counts, counts the owner once when the owner's own report
// reaches it too, as when the owner saw a different fleet for a moment.
func TestStandbyCopyCountsOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		copyFirst  bool
		copy, rep  int64
		wantOthers int64
	}{
		{"copy then report", true, 5, 7, 7},
		{"report then copy", false, 9, 7, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOwnedFleet(t, 3, ownedRule(100, time.Minute, window.Fixed))
			sb := f.nodes[0].Table("api")
			key := f.keyOwned(1, 0)
			now := t0 + sec
			idx := window.Index(now, time.Minute)
			owner := f.nodes[0].reg.id(f.nodes[1].Self())
			steps := []func(){
				func() {
					if !sb.hold(owner, &Entry{Key: key, Window: idx, Admitted: tc.copy}, now) {
						t.Fatal("the standby copy was refused")
					}
				},
				func() {
					if _, ok := sb.report(owner, &Entry{Key: key, Window: idx, Admitted: tc.rep}, now, 1); !ok {
						t.Fatal("the owner's report was not answered")
					}
				},
			}
			if !tc.copyFirst {
				steps[0], steps[1] = steps[1], steps[0]
			}
			for _, step := range steps {
				step()
			}
			if _, view := sb.Counts(key, now); view.Curr != tc.wantOthers {
				t.Fatalf("the standby sees %d admitted, want %d: the owner counted once", view.Curr, tc.wantOthers)
			}
		})
	}
}

// TestOwnedRestartCutOffCatchesUp checks that a node killed and restarted
// from its saved counts and views, cut off from the fleet while it was
// down and when it came back, ends with the fleet's counts once the cut
// heals, as do the others, whether it was the key's owner, its standby or
// a contributor, and whatever the order in which its peers come back, its
// snapshots cross and it pulls a peer's state: nothing lost, nothing
// counted twice.
func TestOwnedRestartCutOffCatchesUp(t *testing.T) {
	type order struct {
		name string
		// pullFrom is the peer the restarted node pulls from once healed
		// (-1: none), before the snapshots cross or after.
		pullFrom  int
		pullFirst bool
		// roundBetween runs a sync round between the peers' learning of
		// each other and their snapshots; restartedLast has the restarted
		// node learn of its peers after they learn of it.
		roundBetween, restartedLast bool
	}
	orders := []order{
		{name: "pull-after-snapshots", pullFrom: 0},
		{name: "no-pull", pullFrom: -1},
		{name: "pull-first", pullFrom: 0, pullFirst: true},
		{name: "pull-other-peer", pullFrom: 1},
		{name: "round-before-snapshots", pullFrom: 0, roundBetween: true},
		{name: "round-then-pull-other", pullFrom: 1, roundBetween: true},
		{name: "restarted-learns-last", pullFrom: 0, roundBetween: true, restartedLast: true},
		{name: "pull-first-round-between", pullFrom: 1, pullFirst: true, roundBetween: true},
	}
	for _, role := range []string{"owner", "standby", "contributor"} {
		for _, ord := range orders {
			t.Run(role+"/"+ord.name, func(t *testing.T) {
				restartCutOff(t, role, ord.pullFrom, ord.pullFirst, ord.roundBetween, ord.restartedLast)
			})
		}
	}
}

// restartCutOff runs one case of TestOwnedRestartCutOffCatchesUp: node 2
// is the key's role; nodes 0 and 1 are the others.
func restartCutOff(t *testing.T, role string, pullFrom int, pullFirst, roundBetween, restartedLast bool) {
	r := ownedRule(1000, time.Hour, window.Fixed)
	f := newOwnedFleet(t, 3, r)
	key := ""
	for k := range 1000 {
		cand := fmt.Sprint("key-", k)
		o, sb := f.nodes[0].Table("api").fleet.Load().rank(cand)
		owner, standby := f.nodes[0].reg.inc(o), f.nodes[0].reg.inc(sb)
		ok := false
		switch role {
		case "owner":
			ok = owner == f.nodes[2].Self() && standby == f.nodes[0].Self()
		case "standby":
			ok = owner == f.nodes[0].Self() && standby == f.nodes[2].Self()
		default:
			ok = owner == f.nodes[0].Self() && standby == f.nodes[1].Self()
		}
		if ok {
			key = cand
			break
		}
	}
	if key == "" {
		t.Fatalf("no key with node 2 its %s", role)
	}
	now := t0 + sec
	tick := func() {
		now += int64(100 * time.Millisecond)
		f.tick(now)
	}
	admit := func(i, n int) {
		for range n {
			if d := f.allow(i, now, key, 1); !d.Allowed {
				t.Fatalf("node %d refused: %+v", i, d)
			}
		}
	}
	admit(2, 41)
	admit(0, 20)
	admit(1, 20)
	tick()
	tick()
	saved, views := f.nodes[2].Snapshot(now), f.nodes[2].Views(now)
	old := f.nodes[2].Self()

	// Node 2 dies; the others go on without it.
	f.down[old.Node] = true
	rest := []Incarnation{f.nodes[0].Self(), f.nodes[1].Self()}
	f.nodes[0].SetPeers(rest)
	f.nodes[1].SetPeers(rest)
	tick()
	admit(0, 30)
	admit(1, 30)
	tick()
	tick()

	// Restarted from its saved counts and views, still cut off.
	rp, err := NewReplica(Config{Self: Incarnation{Node: old.Node, Boot: old.Boot + 1}, Rules: []window.Rule{r}, Start: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Delta{saved, views} {
		if _, err := rp.ReceiveFrom(now, d, Origin{Asked: true}); err != nil {
			t.Fatal(err)
		}
	}
	rp.SetPeers([]Incarnation{rp.Self()})
	f.nodes[2] = rp
	for range 10 {
		if d, err := rp.Allow(now, "api", key, 1); err != nil || !d.Allowed {
			t.Fatalf("restarted node alone: %+v, %v", d, err)
		}
	}
	tick()

	// Healed: each node streams every other its snapshot, and the
	// restarted one may pull a peer's state and views.
	all := []Incarnation{f.nodes[0].Self(), f.nodes[1].Self(), rp.Self()}
	delete(f.down, old.Node)
	pull := func() {
		if pullFrom < 0 {
			return
		}
		src := f.nodes[pullFrom]
		for _, d := range []*Delta{src.Snapshot(now), src.Views(now)} {
			if _, err := rp.ReceiveFrom(now, d, Origin{Asked: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pullFirst {
		pull()
	}
	for _, n := range f.nodes[:2] {
		n.SetPeers(all)
	}
	if !restartedLast {
		rp.SetPeers(all)
	}
	if roundBetween {
		tick()
	}
	if restartedLast {
		rp.SetPeers(all)
	}
	for _, from := range f.nodes {
		for _, to := range f.nodes {
			if from != to {
				from.ResendAll(to.Self())
				f.deliver(now, []Outbound{{To: to.Self(), Delta: from.Snapshot(now)}})
			}
		}
	}
	if !pullFirst {
		pull()
	}
	for range 10 {
		tick()
	}
	const want = 41 + 20 + 20 + 30 + 30 + 10
	for i, n := range f.nodes {
		if _, view := n.Table("api").Counts(key, now); view.Curr != want {
			t.Errorf("node %d sees %d admitted, want the %d admitted: %s", i, view.Curr, want, describeKey(n, key))
		}
	}
}

// describeKey is what node r holds for key of rule api, owner allocation's
// state included, for a failure message.
func describeKey(r *Replica, key string) string {
	t := r.Table("api")
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(key, h)
	if s == nil || s.o == nil {
		return "none"
	}
	o := s.o
	out := fmt.Sprintf("%s own=%v others=%v", r.Self().Node, s.own, o.others)
	if x := o.ext; x != nil {
		out += fmt.Sprintf(" held=%v from=%v", x.held, r.reg.inc(x.heldFrom))
		if b := x.book; b != nil {
			for _, a := range b.accts {
				out += fmt.Sprintf(" [%v %v]", r.reg.inc(a.inc), a.adm)
			}
		}
	}
	return out
}

// TestSettledReachesAHandedOverIncarnation gives a key's owner the counts
// of a live node as a handover does (passed on by another node, so the
// node has never reported to this owner), and has the owner admit after
// it: once the key goes quiet, the owner tells that node the fleet's
// counts too, and its view settles, although it never asks.
func TestSettledReachesAHandedOverIncarnation(t *testing.T) {
	const key = "dave"
	f := newOwnedFleet(t, 3, ownedRule(100, time.Hour, window.Fixed))
	own := f.ownerIndex(key)
	owner := f.nodes[own]
	// Not the key's standby, which hears the owner's counts anyway.
	_, standby := owner.Table("api").fleet.Load().rank(key)
	y := -1
	for i, rp := range f.nodes {
		if id, _ := owner.reg.lookup(rp.Self()); i != own && id != standby {
			y = i
		}
	}
	id, ok := owner.reg.lookup(f.nodes[y].Self())
	if !ok {
		t.Fatal("the owner has no id for the other node")
	}
	tb := owner.Table("api")
	idx := window.Index(t0, time.Hour)
	if !tb.mergeForeign(id, &Entry{Key: key, Window: idx, Admitted: 3}, t0, true) {
		t.Fatal("the owner did not book the handed-over counts")
	}
	if d := f.allow(own, t0+sec, key, 2); !d.Allowed {
		t.Fatalf("the owner's own check: %+v", d)
	}
	for i := range 4 {
		f.tick(t0 + 2*sec + int64(i)*int64(100*time.Millisecond))
	}
	// y's own count is 0 (the handed-over 3 are the owner's word), so its
	// view of the others is what the owner told it: 2 of its own and 3
	// booked for y, less y's part, as an answer says.
	if _, view := f.nodes[y].Table("api").Counts(key, t0+3*sec); view.Curr < 2 {
		t.Errorf("the handed-over node's view of %q is %d, want at least the owner's 2: the owner never told it", key, view.Curr)
	}
}
