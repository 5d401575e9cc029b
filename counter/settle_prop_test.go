package counter

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/window"
)

// TestViewsSettleAfterFaults runs a fleet of three to five owner-allocated
// replicas through random checks, saves, crashes, restarts from the state
// last saved, partitions, heals, stalls, memberships that learn of each
// change in any order or suspect a live peer, messages held on a link,
// streams that reopen late and pulls of a peer's state, as the cluster
// layer drives them, on an hour's window or on 3 s fixed or sliding ones
// that roll meanwhile; then it heals everything and lets the fleet go
// quiet. Every node that holds counts of a key's window (admitted in its
// run, or restored from its last save) must then see what the fleet
// admitted in it, less at most what crashes lost (what the crashed runs
// admitted after their last save), and no node more; for the window
// before the current one, when the fleet had five rounds to settle before
// it closed.
//
// SETTLE_TRACE=KEY adds every message about KEY to a failure's steps.
func TestViewsSettleAfterFaults(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newFaultModel(rt, rapid.IntRange(3, 5).Draw(rt, "nodes"))
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			m.step()
		}
		m.healAll()
		m.check()
	})
}

// faultModel is a fleet of replicas under faults, with the cluster
// layer's rules for membership, streams and pulls.
type faultModel struct {
	rt    *rapid.T
	rule  window.Rule
	names []string
	nodes []*Replica // nil while down
	boots []uint64
	// saved is each node's counts and views as it last saved them, and
	// unsaved what its run admitted of each key since.
	saved   [][2]*Delta
	unsaved []map[keyWindow]int64
	// lost is what crashes may have lost of each key's windows.
	lost map[keyWindow]int64
	// group is each node's side of the partition in force.
	group []int
	// members is the membership node i last learnt, as node indexes.
	members [][]int
	// linked[{i, j}]: node i's stream to j is open and has sent its
	// snapshot since it last broke.
	linked map[[2]int]bool
	// queue holds the messages in flight on each link, in order.
	queue map[[2]int][]*Delta
	// pull: node i restarted and has yet to pull a peer's state.
	pull  []bool
	keys  []string
	total map[keyWindow]int64
	// holds[i] are the keys node i holds counts of: some it admitted in
	// this run, or restored from its last save; saved[i] those the save
	// held.
	holds, holdsSaved []map[keyWindow]bool
	now               int64
	// healedAt is when healAll began.
	healedAt int64
	log      []string
}

func newFaultModel(rt *rapid.T, n int) *faultModel {
	count := rapid.SampledFrom([]int64{5, 50, window.MaxCount}).Draw(rt, "count")
	r := rapid.SampledFrom([]window.Rule{
		ownedRule(count, time.Hour, window.Fixed),
		ownedRule(count, 3*time.Second, window.Fixed),
		ownedRule(count, 3*time.Second, window.Sliding),
	}).Draw(rt, "rule")
	m := &faultModel{rt: rt, rule: r,
		linked: map[[2]int]bool{}, queue: map[[2]int][]*Delta{}, total: map[keyWindow]int64{}, lost: map[keyWindow]int64{},
		now: t0 + rapid.Int64Range(0, int64(3*time.Second)).Draw(rt, "start")}
	for i := range n {
		m.names = append(m.names, string(rune('a'+i)))
		m.boots = append(m.boots, 1)
		m.saved = append(m.saved, [2]*Delta{})
		m.unsaved = append(m.unsaved, map[keyWindow]int64{})
		m.holds = append(m.holds, map[keyWindow]bool{})
		m.holdsSaved = append(m.holdsSaved, map[keyWindow]bool{})
		m.group = append(m.group, 0)
		m.pull = append(m.pull, false)
		rp, err := NewReplica(Config{Self: Incarnation{Node: m.names[i], Boot: 1}, Rules: []window.Rule{m.rule}, Start: m.now})
		if err != nil {
			rt.Fatal(err)
		}
		m.nodes = append(m.nodes, rp)
	}
	m.members = make([][]int, n)
	for i := range n {
		for j := range n {
			m.members[i] = append(m.members[i], j)
			if i != j {
				m.linked[[2]int{i, j}] = true
			}
		}
	}
	for i := range n {
		m.nodes[i].SetPeers(m.incs(m.members[i]))
	}
	for k := range 4 {
		m.keys = append(m.keys, fmt.Sprint("k", k))
	}
	return m
}

func (m *faultModel) incs(idx []int) []Incarnation {
	var out []Incarnation
	for _, j := range idx {
		if m.nodes[j] != nil {
			out = append(out, m.nodes[j].Self())
		}
	}
	return out
}

func (m *faultModel) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("%6.1fs ", float64(m.now-t0)/1e9)+fmt.Sprintf(format, args...))
}

// connected says whether messages pass between nodes i and j.
func (m *faultModel) connected(i, j int) bool {
	return i != j && m.nodes[i] != nil && m.nodes[j] != nil && m.group[i] == m.group[j]
}

// index is the node whose current incarnation is inc, -1 for none.
func (m *faultModel) index(inc Incarnation) int {
	for j, rp := range m.nodes {
		if rp != nil && rp.Self() == inc {
			return j
		}
	}
	return -1
}

// send queues node from's messages on its links, to be delivered in
// order by flush.
func (m *faultModel) send(from int, out []Outbound) {
	for _, o := range out {
		if to := m.index(o.To); to >= 0 {
			k := [2]int{from, to}
			m.queue[k] = append(m.queue[k], o.Delta)
		}
	}
}

// flush delivers what the link from node from to node to holds, in order,
// and queues the replies; a link that cannot pass loses what it holds and
// breaks its sender's stream.
func (m *faultModel) flush(from, to int) {
	k := [2]int{from, to}
	for len(m.queue[k]) > 0 {
		d := m.queue[k][0]
		m.queue[k] = m.queue[k][1:]
		if !m.connected(from, to) {
			m.queue[k] = nil
			m.linked[k] = false
			if m.nodes[from] != nil && m.nodes[to] != nil {
				m.nodes[from].ResendAll(m.nodes[to].Self())
			}
			return
		}
		if tk := os.Getenv("SETTLE_TRACE"); tk != "" {
			for _, rd := range d.Rules {
				for _, e := range rd.Entries {
					if e.Key == tk {
						m.logf("  %s->%s kind %d inc %v %+v", m.names[from], m.names[to], d.Kind, d.Incarnations[e.Inc], e)
					}
				}
			}
		}
		rp := m.nodes[to]
		if rp.Unheard(d) {
			if _, err := rp.ReceiveFrom(m.now, m.nodes[from].Snapshot(m.now), Origin{Asked: true}); err != nil {
				m.rt.Fatalf("%s pulling from %s: %v", m.names[to], m.names[from], err)
			}
		}
		res, err := rp.Receive(m.now, d)
		if err != nil {
			m.rt.Fatalf("%s receiving from %s: %v", m.names[to], m.names[from], err)
		}
		if res.Reply != nil {
			m.send(to, []Outbound{*res.Reply})
		}
	}
}

// flushAll delivers everything in flight, and what it draws.
func (m *faultModel) flushAll() {
	for {
		busy := false
		for k, q := range m.queue {
			if len(q) > 0 {
				busy = true
				m.flush(k[0], k[1])
			}
		}
		if !busy {
			return
		}
	}
}

func (m *faultModel) up() []int {
	var out []int
	for i, rp := range m.nodes {
		if rp != nil {
			out = append(out, i)
		}
	}
	return out
}

func (m *faultModel) down() []int {
	var out []int
	for i, rp := range m.nodes {
		if rp == nil {
			out = append(out, i)
		}
	}
	return out
}

func (m *faultModel) step() {
	switch rapid.IntRange(0, 12).Draw(m.rt, "action") {
	case 0, 1:
		if up := m.up(); len(up) > 0 {
			i := rapid.SampledFrom(up).Draw(m.rt, "node")
			key := rapid.SampledFrom(m.keys).Draw(m.rt, "key")
			m.admit(i, key, rapid.IntRange(1, 5).Draw(m.rt, "hits"))
		}
	case 2:
		m.tick()
	case 3:
		if up := m.up(); len(up) > 1 {
			i := rapid.SampledFrom(up).Draw(m.rt, "node")
			if rapid.Bool().Draw(m.rt, "save first") {
				m.save(i)
			}
			m.kill(i)
		}
	case 4:
		if down := m.down(); len(down) > 0 {
			m.restart(rapid.SampledFrom(down).Draw(m.rt, "node"))
		}
	case 5:
		for i := range m.group {
			m.group[i] = rapid.IntRange(0, 1).Draw(m.rt, "side")
		}
		m.logf("partition %v", m.group)
	case 6:
		clear(m.group)
		m.logf("heal")
	case 7:
		if up := m.up(); len(up) > 0 {
			m.learn(rapid.SampledFrom(up).Draw(m.rt, "node"))
		}
	case 8:
		if up := m.up(); len(up) > 0 {
			m.link(rapid.SampledFrom(up).Draw(m.rt, "node"))
		}
	case 9:
		if up := m.up(); len(up) > 0 {
			m.pullState(rapid.SampledFrom(up).Draw(m.rt, "node"))
		}
	case 10:
		if up := m.up(); len(up) > 0 {
			m.save(rapid.SampledFrom(up).Draw(m.rt, "node"))
		}
	case 11:
		from := rapid.IntRange(0, len(m.nodes)-1).Draw(m.rt, "from")
		to := rapid.IntRange(0, len(m.nodes)-1).Draw(m.rt, "to")
		m.flush(from, to)
	case 12:
		if up := m.up(); len(up) > 1 {
			m.suspect(rapid.SampledFrom(up).Draw(m.rt, "node"), rapid.SampledFrom(up).Draw(m.rt, "suspect"))
		}
	}
}

// admit makes n checks of one hit on node i, asking the key's owner where
// the node must.
func (m *faultModel) admit(i int, key string, n int) {
	rp := m.nodes[i]
	got := 0
	for range n {
		d, ask, err := rp.Decide(m.now, m.rule.Name, key, 1, 0, nil)
		if err != nil {
			m.rt.Fatal(err)
		}
		if ask != nil {
			outcome := Answered
			to := m.index(ask.To)
			if to < 0 || !m.connected(i, to) {
				outcome = Lost
			} else {
				// The question goes behind what the link holds, and
				// its answer behind what the way back holds.
				m.send(i, []Outbound{*ask})
				m.flush(i, to)
				m.flush(to, i)
			}
			if d, err = rp.Settle(m.now, m.rule.Name, key, 1, outcome, nil); err != nil {
				m.rt.Fatal(err)
			}
		}
		if d.Allowed {
			got++
		}
	}
	kw := keyWindow{key, window.Index(m.now, m.rule.Window)}
	m.total[kw] += int64(got)
	m.unsaved[i][kw] += int64(got)
	if got > 0 {
		m.holds[i][kw] = true
	}
	m.logf("%s admits %d of %d on %s", m.names[i], got, n, key)
}

// tick runs every node's sync round a sync interval on, or, drawn, after
// a stall of several.
func (m *faultModel) tick() {
	m.tickAfter(rapid.SampledFrom([]int{1, 1, 1, 4, 10}).Draw(m.rt, "intervals"))
}

// tickAfter runs every node's sync round n sync intervals on.
func (m *faultModel) tickAfter(n int) {
	m.now += int64(m.rule.SyncInterval) * int64(n)
	for _, i := range m.up() {
		m.send(i, m.nodes[i].Tick(m.now))
	}
	if rapid.Bool().Draw(m.rt, "deliver at once") {
		m.flushAll()
	}
}

func (m *faultModel) save(i int) {
	m.saved[i] = [2]*Delta{m.nodes[i].Snapshot(m.now), m.nodes[i].Views(m.now)}
	clear(m.unsaved[i])
	m.holdsSaved[i] = maps.Clone(m.holds[i])
	m.logf("%s saves", m.names[i])
}

func (m *faultModel) kill(i int) {
	for key, n := range m.unsaved[i] {
		m.lost[key] += n
	}
	clear(m.unsaved[i])
	m.nodes[i] = nil
	for k := range m.linked {
		if k[0] == i || k[1] == i {
			m.linked[k] = false
		}
	}
	for k := range m.queue {
		if k[0] == i || k[1] == i {
			delete(m.queue, k)
		}
	}
	m.logf("kill %s", m.names[i])
}

func (m *faultModel) restart(i int) {
	m.boots[i]++
	rp, err := NewReplica(Config{Self: Incarnation{Node: m.names[i], Boot: m.boots[i]}, Rules: []window.Rule{m.rule}, Start: m.now})
	if err != nil {
		m.rt.Fatal(err)
	}
	for _, d := range m.saved[i] {
		if d == nil {
			continue
		}
		if _, err := rp.ReceiveFrom(m.now, d, Origin{Asked: true}); err != nil {
			m.rt.Fatal(err)
		}
	}
	rp.SetPeers([]Incarnation{rp.Self()})
	m.nodes[i], m.members[i], m.pull[i] = rp, []int{i}, true
	m.holds[i] = maps.Clone(m.holdsSaved[i])
	m.logf("restart %s", m.names[i])
}

// learn brings node i's membership up to the nodes it can reach, as its
// gossip does in time.
func (m *faultModel) learn(i int) {
	var now []int
	for j := range m.nodes {
		if j == i || m.connected(i, j) {
			now = append(now, j)
		}
	}
	for _, j := range m.members[i] {
		if !slices.Contains(now, j) {
			m.linked[[2]int{i, j}] = false
		}
	}
	m.members[i] = now
	m.nodes[i].SetPeers(m.incs(now))
	m.logf("%s learns %v", m.names[i], now)
}

// suspect has node i drop node j from its membership though j is
// reachable, as a failure detector starved of CPU does.
func (m *faultModel) suspect(i, j int) {
	if i == j || !slices.Contains(m.members[i], j) {
		return
	}
	m.members[i] = slices.DeleteFunc(slices.Clone(m.members[i]), func(k int) bool { return k == j })
	m.linked[[2]int{i, j}] = false
	m.nodes[i].SetPeers(m.incs(m.members[i]))
	m.logf("%s suspects %s", m.names[i], m.names[j])
}

// link opens node i's streams to the members it reaches whose streams are
// not open: each starts with a resend and i's snapshot.
func (m *faultModel) link(i int) {
	for _, j := range m.members[i] {
		if !m.connected(i, j) || m.linked[[2]int{i, j}] {
			continue
		}
		inc := m.nodes[j].Self()
		m.nodes[i].ResendAll(inc)
		m.queue[[2]int{i, j}] = nil
		m.send(i, []Outbound{{To: inc, Delta: m.nodes[i].Snapshot(m.now)}})
		m.linked[[2]int{i, j}] = true
		m.logf("%s links to %s", m.names[i], m.names[j])
	}
}

// pullState has a restarted node pull a member's state and views.
func (m *faultModel) pullState(i int) {
	if !m.pull[i] {
		return
	}
	for _, j := range m.members[i] {
		if !m.connected(i, j) {
			continue
		}
		for _, d := range []*Delta{m.nodes[j].Snapshot(m.now), m.nodes[j].Views(m.now)} {
			if _, err := m.nodes[i].ReceiveFrom(m.now, d, Origin{Asked: true}); err != nil {
				m.rt.Fatal(err)
			}
		}
		m.pull[i] = false
		m.logf("%s pulls from %s", m.names[i], m.names[j])
		return
	}
}

// healAll heals every cut, restarts the nodes that are down and lets the
// fleet settle with no more checks.
func (m *faultModel) healAll() {
	clear(m.group)
	for _, i := range m.down() {
		m.restart(i)
	}
	m.logf("heal all")
	for i := range m.nodes {
		m.learn(i)
	}
	for i := range m.nodes {
		m.link(i)
		m.pullState(i)
	}
	m.healedAt = m.now
	for range 10 {
		m.tickAfter(1)
		m.flushAll()
		for i := range m.nodes {
			m.link(i)
		}
		m.flushAll()
	}
}

func (m *faultModel) check() {
	var bad []string
	idx := window.Index(m.now, m.rule.Window)
	for _, key := range m.keys {
		for i, rp := range m.nodes {
			_, view := rp.Table(m.rule.Name).Counts(key, m.now)
			for p, got := range []int64{view.Prev, view.Curr} {
				kw := keyWindow{key, idx - 1 + int64(p)}
				if p == 0 && window.Start(idx, m.rule.Window) < m.healedAt+5*int64(m.rule.SyncInterval) {
					// The window closed before the fleet had settled:
					// an owner tells a quiet key's counts in the window
					// they are of.
					if got > m.total[kw] {
						bad = append(bad, fmt.Sprintf("%s sees %d admitted for %s in the window before, more than the %d admitted", m.names[i], got, key, m.total[kw]))
					}
					continue
				}
				if got > m.total[kw] || m.holds[i][kw] && got < m.total[kw]-m.lost[kw] {
					bad = append(bad, fmt.Sprintf("%s sees %d admitted for %s in window %d, want %d (at most %d lost)",
						m.names[i], got, key, kw.w-idx, m.total[kw], m.lost[kw]))
					for _, rp := range m.nodes {
						bad = append(bad, "    "+describeKey(rp, key))
					}
				}
			}
		}
	}
	if len(bad) > 0 {
		m.rt.Fatalf("views did not settle:\n  %s\nsteps:\n  %s", strings.Join(bad, "\n  "), strings.Join(m.log, "\n  "))
	}
}

// keyWindow is one key's window.
type keyWindow struct {
	key string
	w   int64
}
