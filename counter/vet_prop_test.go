package counter

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/window"
)

// forgeFleet is a fleet of replicas of one rule, driven by a property test:
// real checks, sync rounds and restarts, and forged and replayed deltas.
type forgeFleet struct {
	t     *rapid.T
	rule  window.Rule
	nodes []*Replica
	// incs are every incarnation that ever ran, live or not: the fleet's
	// count of a key in a window is at most rule.Count for each.
	incs []Incarnation
	now  int64
	// sent are the real deltas delivered so far, for replays.
	sent []Outbound
	keys []string
}

func (f *forgeFleet) live() []Incarnation {
	out := make([]Incarnation, len(f.nodes))
	for i, rp := range f.nodes {
		out[i] = rp.Self()
	}
	return out
}

func (f *forgeFleet) node(inc Incarnation) *Replica {
	for _, rp := range f.nodes {
		if rp.Self() == inc {
			return rp
		}
	}
	return nil
}

// deliver hands real deltas to their peers, with the replies they draw.
func (f *forgeFleet) deliver(out []Outbound) {
	for len(out) > 0 {
		o := out[0]
		out = out[1:]
		to := f.node(o.To)
		if to == nil {
			continue
		}
		f.sent = append(f.sent, o)
		res, err := to.Receive(f.now, o.Delta)
		if err != nil {
			f.t.Fatalf("%s receiving a real delta from %s: %v", o.To.Node, o.Delta.From.Node, err)
		}
		if res.Reply != nil {
			out = append(out, *res.Reply)
		}
	}
}

// check is a real check on node i, asking the key's owner where Decide
// says to.
func (f *forgeFleet) check(i int, key string, hits int64) {
	rp := f.nodes[i]
	_, ask, err := rp.Decide(f.now, f.rule.Name, key, hits, 0, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if ask != nil {
		f.deliver([]Outbound{*ask})
		if _, err := rp.Settle(f.now, f.rule.Name, key, hits, Answered, nil); err != nil {
			f.t.Fatal(err)
		}
	}
}

// restart replaces node i with a new incarnation that pulls node j's state.
func (f *forgeFleet) restart(i, j int) {
	old := f.nodes[i].Self()
	inc := Incarnation{Node: old.Node, Boot: old.Boot + 1}
	rp, err := NewReplica(Config{Self: inc, Rules: []window.Rule{f.rule}, Start: f.now})
	if err != nil {
		f.t.Fatal(err)
	}
	src := f.nodes[j]
	for _, d := range []*Delta{src.Snapshot(f.now), src.Views(f.now)} {
		if _, err := rp.ReceiveFrom(f.now, d, Origin{Asked: true}); err != nil {
			f.t.Fatal(err)
		}
	}
	f.nodes[i] = rp
	f.incs = append(f.incs, inc)
	live := f.live()
	for _, n := range f.nodes {
		n.SetPeers(live)
	}
}

// forged draws a delta a forger sends node to, claiming to be one of the
// live members (a node takes deltas from members alone): any kind, any
// incarnations, entries of any size for windows around now.
func (f *forgeFleet) forged(to *Replica) *Delta {
	t := f.t
	var members []Incarnation
	for _, inc := range f.live() {
		if inc != to.Self() {
			members = append(members, inc)
		}
	}
	from := rapid.SampledFrom(members).Draw(t, "from")
	// Relayed: incarnations that ran, and made-up ones, some under the
	// names of members.
	pool := append([]Incarnation{}, f.incs...)
	for i := range uint64(4) {
		pool = append(pool, Incarnation{Node: "z", Boot: i}, Incarnation{Node: from.Node, Boot: from.Boot + 100 + i})
	}
	incs := append([]Incarnation{from}, rapid.SliceOfN(rapid.SampledFrom(pool), 0, 4).Draw(t, "relayed")...)
	idx := window.Index(f.now, f.rule.Window)
	c := f.rule.Count
	count := rapid.SampledFrom([]int64{0, 1, c / 2, c, c + 1, 2 * c, 3*c + 1, window.MaxCount, maxEntry}).
		Filter(func(v int64) bool { return v >= 0 })
	entries := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Entry {
		e := Entry{
			Key:      rapid.SampledFrom(f.keys).Draw(t, "key"),
			Window:   idx + rapid.Int64Range(-2, 3).Draw(t, "ahead"),
			Inc:      uint32(rapid.IntRange(0, len(incs)-1).Draw(t, "inc")),
			Admitted: count.Draw(t, "admitted"),
			Demand:   count.Draw(t, "demand"),
			Prev:     count.Draw(t, "prev"),
			Told:     rapid.Uint64Range(0, 1<<40).Draw(t, "told"),
		}
		if rapid.Bool().Draw(t, "grants") {
			e.Grant, e.Next, e.Rate = count.Draw(t, "grant"), count.Draw(t, "next"), count.Draw(t, "rate")
			e.RateFrom = window.Start(e.Window, f.rule.Window) - rapid.Int64Range(0, 2*int64(f.rule.Window)).Draw(t, "rateFrom")
			e.Claim, e.Need, e.Ask = count.Draw(t, "claim"), count.Draw(t, "need"), count.Draw(t, "ask")
		}
		return e
	}), 1, 6).Draw(t, "entries")
	return &Delta{
		From: from, Seq: rapid.Uint64Range(0, 1<<40).Draw(t, "seq"), Ack: rapid.Uint64Range(0, 1<<40).Draw(t, "ack"),
		Kind: Kind(rapid.IntRange(0, int(KindView)).Draw(t, "kind")), Full: rapid.Bool().Draw(t, "full"),
		Incarnations: incs, Live: 3, Rules: []RuleDelta{{Rule: f.rule.Name, Entries: entries}},
	}
}

// holds checks that no node's view of a key exceeds the count for each
// incarnation that ever ran, and no node's own count the count.
func (f *forgeFleet) holds(step string) {
	bound := int64(len(f.incs)) * f.rule.Count
	for _, rp := range f.nodes {
		for _, key := range f.keys {
			own, view := rp.Table(f.rule.Name).Counts(key, f.now)
			if view.Curr > bound || view.Prev > bound {
				f.t.Fatalf("after %s, %s's view of %s is %+v, over %d incarnations × count %d", step, rp.Self().Node, key, view,
					len(f.incs), f.rule.Count)
			}
			if own.Curr > f.rule.Count || own.Prev > f.rule.Count {
				f.t.Fatalf("after %s, %s admitted %+v of %s, over the count %d", step, rp.Self().Node, own, key, f.rule.Count)
			}
		}
	}
}

// TestPropertyForgedDeltasBounded: for any sequence of real checks, sync
// rounds, restarts, forged deltas (from a member's name, of any kind,
// naming any incarnation, with any counts) and replays of real deltas, no
// node's view of a key exceeds the sum over the incarnations that ran of
// what each could have admitted, the rule's count.
func TestPropertyForgedDeltasBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := window.Rule{Name: "api", Count: rapid.SampledFrom([]int64{3, 10, 100}).Draw(t, "count"), Window: time.Second,
			Type:         rapid.SampledFrom([]window.Type{window.Fixed, window.Sliding}).Draw(t, "type"),
			Allocation:   rapid.SampledFrom([]window.Allocation{window.Owner, window.Adaptive, window.Classic}).Draw(t, "alloc"),
			SyncInterval: 100 * time.Millisecond}
		f := &forgeFleet{t: t, rule: r, now: t0, keys: []string{"x", "y"}}
		for i := range 3 {
			rp, err := NewReplica(Config{Self: Incarnation{Node: fmt.Sprint("n", i), Boot: 1}, Rules: []window.Rule{r}, Start: t0})
			if err != nil {
				t.Fatal(err)
			}
			f.nodes = append(f.nodes, rp)
			f.incs = append(f.incs, rp.Self())
		}
		for _, rp := range f.nodes {
			rp.SetPeers(f.live())
		}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for s := range steps {
			var step string
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 3:
				i := rapid.IntRange(0, len(f.nodes)-1).Draw(t, "node")
				key := rapid.SampledFrom(f.keys).Draw(t, "key")
				hits := rapid.Int64Range(0, min(3, r.Count)).Draw(t, "hits")
				f.check(i, key, hits)
				step = fmt.Sprintf("step %d: %s checks %d of %s", s, f.nodes[i].Self().Node, hits, key)
			case op < 5:
				f.now += rapid.Int64Range(1, int64(r.SyncInterval)).Draw(t, "advance")
				for _, rp := range f.nodes {
					f.deliver(rp.Tick(f.now))
				}
				step = fmt.Sprintf("step %d: a round", s)
			case op < 8:
				to := f.nodes[rapid.IntRange(0, len(f.nodes)-1).Draw(t, "to")]
				d := f.forged(to)
				if _, err := to.Receive(f.now, d); err != nil {
					t.Fatalf("a forged delta that is well-formed: %v", err)
				}
				step = fmt.Sprintf("step %d: a forged delta to %s: %+v", s, to.Self().Node, *d)
			case op < 9 && len(f.sent) > 0:
				o := rapid.SampledFrom(f.sent).Draw(t, "replayed")
				if to := f.node(o.To); to != nil {
					if _, err := to.Receive(f.now, o.Delta); err != nil {
						t.Fatal(err)
					}
				}
				step = fmt.Sprintf("step %d: a replay to %s", s, o.To.Node)
			case op == 9 && len(f.incs) < 5:
				i := rapid.IntRange(0, len(f.nodes)-1).Draw(t, "restarted")
				f.restart(i, (i+1)%len(f.nodes))
				step = fmt.Sprintf("step %d: %s restarts", s, f.nodes[i].Self().Node)
			default:
				continue
			}
			f.holds(step)
		}
	})
}
