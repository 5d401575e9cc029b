package counter

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/window"
)

// netSim drives replicas of one rule over a network with a fixed one-way
// latency, in virtual time, as the cluster drives them: sync rounds at each
// node's own phase, an owner's answers sent back at once, and checks that
// must ask a key's owner waiting for its answer. It keeps the exact count of
// what the fleet admitted, so that a test can tell the moment the fleet
// admits beyond what one exact limiter would.
type netSim struct {
	t       failer
	rule    window.Rule
	latency int64
	nodes   []*Replica
	index   map[Incarnation]int
	q       simQueue
	// down[i] loses every message to or from node i.
	down []bool
	// admitted is what the whole fleet admitted, per key and window.
	admitted map[string]map[int64]int64
	// waiting are, per node and key, the checks held for an owner's
	// answer, and asked the sequence of the question in flight.
	waiting map[nodeKey][]int64
	asked   map[nodeKey]uint64
	// over is the first admission past the count, "" while none.
	over string
	// decided counts checks decided, allowed those admitted.
	decided, allowed int
	sent             int // messages sent
	// onRefuse, if set, sees every refusal.
	onRefuse func(at int64, node int, d window.Decision)
	// refundAfter, if set, says for each admission whether its hits are
	// given back, and how long after; refunded counts the hits that were.
	refundAfter func() (time.Duration, bool)
	refunded    int64
	// stall, if set, is extra delay for a message from node i to node j
	// sent at moment at, as a lossy link's retransmissions add it: a link
	// delivers in order, so a stalled message holds back those behind it.
	stall    func(i, j int, at int64) int64
	linkFree map[[2]int]int64
	// borrowTimeout, if set, is how long a check waits for its owner's
	// answer; silent[{i, j}] is since when node i has waited on node j
	// without hearing from it, and after lostAfter timeouts of it node i
	// decides as a node whose owner is lost.
	borrowTimeout int64
	silent        map[[2]int]int64
}

// failer is what netSim needs of a test: testing.TB or rapid.T.
type failer interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type nodeKey struct {
	node int
	key  string
}

type simEvent struct {
	at    int64
	seq   uint64
	kind  uint8 // 0 tick, 1 deliver, 2 check, 3 refund, 4 borrow timeout
	node  int
	key   string
	delta *Delta
	tk    *Ticket
	seq2  uint64 // kind 4: the question timed out
}

type simQueue struct {
	items []simEvent
	seq   uint64
}

func (q *simQueue) Len() int { return len(q.items) }
func (q *simQueue) Less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
func (q *simQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *simQueue) Push(x any)    { q.items = append(q.items, x.(simEvent)) }
func (q *simQueue) Pop() any {
	n := len(q.items) - 1
	e := q.items[n]
	q.items = q.items[:n]
	return e
}
func (q *simQueue) push(e simEvent) {
	q.seq++
	e.seq = q.seq
	heap.Push(q, e)
}

// newNetSim starts n replicas of rule at moment start, each syncing at a
// phase drawn from seed.
func newNetSim(t failer, n int, rule window.Rule, latency time.Duration, start int64, seed uint64) *netSim {
	s := &netSim{t: t, rule: rule, latency: int64(latency), index: map[Incarnation]int{}, down: make([]bool, n),
		admitted: map[string]map[int64]int64{}, waiting: map[nodeKey][]int64{}, asked: map[nodeKey]uint64{},
		linkFree: map[[2]int]int64{}, silent: map[[2]int]int64{}}
	rng := rand.New(rand.NewPCG(seed, 7))
	var incs []Incarnation
	for i := range n {
		inc := Incarnation{Node: fmt.Sprintf("n%03d", i), Boot: 1}
		r, err := NewReplica(Config{Self: inc, Rules: []window.Rule{rule}, Start: start,
			Phase: time.Duration(rng.Int64N(int64(rule.SyncInterval)))})
		if err != nil {
			t.Fatal(err)
		}
		s.nodes = append(s.nodes, r)
		s.index[inc] = i
		incs = append(incs, inc)
	}
	for i, r := range s.nodes {
		r.SetPeers(incs)
		s.q.push(simEvent{at: r.NextTick(), kind: 0, node: i})
	}
	return s
}

// check schedules a check of one hit on key at node i at moment at.
func (s *netSim) check(at int64, i int, key string) {
	s.q.push(simEvent{at: at, kind: 2, node: i, key: key})
}

func (s *netSim) send(at int64, o Outbound) {
	j, ok := s.index[o.To]
	if !ok {
		s.t.Fatalf("a delta to %v, which is no node", o.To)
	}
	s.sent++
	from := s.index[o.Delta.From]
	if s.down[j] || s.down[from] {
		return
	}
	due := at + s.latency
	if s.stall != nil {
		link := [2]int{from, j}
		due = max(due+s.stall(from, j, at), s.linkFree[link])
		s.linkFree[link] = due
	}
	s.q.push(simEvent{at: due, kind: 1, node: j, delta: o.Delta})
}

// run processes events until moment end.
func (s *netSim) run(end int64) {
	for s.q.Len() > 0 && s.q.items[0].at < end {
		e := heap.Pop(&s.q).(simEvent)
		switch e.kind {
		case 0:
			r := s.nodes[e.node]
			for _, o := range r.Tick(e.at) {
				s.send(e.at, o)
			}
			s.q.push(simEvent{at: max(r.NextTick(), e.at+1), kind: 0, node: e.node})
		case 1:
			res, err := s.nodes[e.node].Receive(e.at, e.delta)
			if err != nil {
				s.t.Fatal(err)
			}
			delete(s.silent, [2]int{e.node, s.index[e.delta.From]})
			if res.Reply != nil {
				s.send(e.at, *res.Reply)
			}
			s.settle(e.at, e.node, e.delta)
		case 2:
			nk := nodeKey{e.node, e.key}
			if s.asked[nk] != 0 {
				s.waiting[nk] = append(s.waiting[nk], e.at)
			} else if !s.decide(e.at, e.node, e.key) {
				s.waiting[nk] = append(s.waiting[nk], e.at)
			}
		case 3:
			got := s.nodes[e.node].Refund(e.tk, e.at)
			s.admitted[e.key][e.tk.Window] -= got
			s.refunded += got
		case 4:
			s.late(e.at, e.node, e.key, e.seq2)
		}
	}
}

// decide decides a check at node i, or asks the key's owner and reports
// false.
func (s *netSim) decide(at int64, i int, key string) bool {
	var tk Ticket
	d, ask, err := s.nodes[i].Decide(at, s.rule.Name, key, 1, 0, &tk)
	if err != nil {
		s.t.Fatal(err)
	}
	if ask != nil {
		s.asked[nodeKey{i, key}] = ask.Delta.Seq
		if s.borrowTimeout > 0 {
			owner := [2]int{i, s.index[ask.To]}
			if _, ok := s.silent[owner]; !ok {
				s.silent[owner] = at
			}
			s.q.push(simEvent{at: at + s.borrowTimeout, kind: 4, node: i, key: key, seq2: ask.Delta.Seq})
		}
		s.send(at, *ask)
		return false
	}
	s.record(at, i, key, d, tk)
	return true
}

// settle decides the checks that waited for an answer d brings.
func (s *netSim) settle(at int64, i int, d *Delta) {
	if d.Kind != KindAnswer {
		return
	}
	for _, rd := range d.Rules {
		for _, e := range rd.Entries {
			nk := nodeKey{i, e.Key}
			if s.asked[nk] == 0 || e.Told < s.asked[nk] {
				continue
			}
			s.asked[nk] = 0
			var tk Ticket
			dec, err := s.nodes[i].Settle(at, s.rule.Name, e.Key, 1, Answered, &tk)
			if err != nil {
				s.t.Fatal(err)
			}
			s.record(at, i, e.Key, dec, tk)
			s.waiting[nk] = s.waiting[nk][1:]
			for len(s.waiting[nk]) > 0 && s.decide(at, i, e.Key) {
				s.waiting[nk] = s.waiting[nk][1:]
			}
		}
	}
}

// timeout decides every check still waiting at node i as if its question
// went unanswered.
func (s *netSim) timeout(at int64, i int) {
	for nk, w := range s.waiting {
		if nk.node != i || len(w) == 0 {
			continue
		}
		s.asked[nk] = 0
		for range w {
			var tk Ticket
			dec, err := s.nodes[i].Settle(at, s.rule.Name, nk.key, 1, Lost, &tk)
			if err != nil {
				s.t.Fatal(err)
			}
			s.record(at, i, nk.key, dec, tk)
		}
		s.waiting[nk] = nil
	}
}

// lostAfter is how many borrow timeouts a node waits on a silent owner
// before it may decide as one whose owner is lost, as the cluster does.
const lostAfter = 4

// late decides the checks at node i waiting on the question seq about key,
// if it is still unanswered, as the cluster does when the borrow timeout
// passes: refused beyond the grant while the owner may only be late,
// decided from the view once it has been silent for long and is down
// (the cluster asks gossip whether it still answers probes).
func (s *netSim) late(at int64, i int, key string, seq uint64) {
	nk := nodeKey{i, key}
	if s.asked[nk] != seq {
		return
	}
	s.asked[nk] = 0
	outcome := Late
	o, _ := s.nodes[i].Table(s.rule.Name).fleet.Load().rank(key)
	owner := s.nodes[i].reg.inc(o)
	if since, ok := s.silent[[2]int{i, s.index[owner]}]; ok && at >= since+lostAfter*s.borrowTimeout && s.down[s.index[owner]] {
		outcome = Lost
	}
	for range s.waiting[nk] {
		var tk Ticket
		dec, err := s.nodes[i].Settle(at, s.rule.Name, key, 1, outcome, &tk)
		if err != nil {
			s.t.Fatal(err)
		}
		s.record(at, i, key, dec, tk)
	}
	s.waiting[nk] = nil
}

func (s *netSim) record(at int64, i int, key string, d window.Decision, tk Ticket) {
	s.decided++
	if !d.Allowed {
		if s.onRefuse != nil {
			s.onRefuse(at, i, d)
		}
		return
	}
	s.allowed++
	byWin := s.admitted[key]
	if byWin == nil {
		byWin = map[int64]int64{}
		s.admitted[key] = byWin
	}
	idx, elapsed := window.Position(at, s.rule.Window)
	byWin[idx]++
	c := window.Counts{Prev: byWin[idx-1], Curr: byWin[idx]}
	if s.rule.Type == window.Fixed {
		c.Prev = 0
	}
	// The check just admitted is in c: the fleet is over the count when
	// the exact estimate, less it, left no room for it.
	c.Curr--
	if exact := s.rule.DecideAt(c, elapsed, 1); !exact.Allowed && s.over == "" {
		s.over = fmt.Sprintf("node %d admitted %q at %v into window %d (prev %d, curr %d before it): one exact limiter refuses",
			i, key, time.Duration(elapsed), idx, c.Prev, c.Curr)
	}
	if s.refundAfter == nil {
		return
	}
	if tk.Window != idx || tk.Hits != 1 {
		s.t.Fatalf("node %d admitted %q in window %d and counted %d hits in window %d", i, key, idx, tk.Hits, tk.Window)
	}
	if after, ok := s.refundAfter(); ok {
		s.q.push(simEvent{at: at + int64(after), kind: 3, node: i, key: key, tk: &tk})
	}
}
