package counter

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/window"
)

// Config describes one node's view.
type Config struct {
	// Self is this node's incarnation.
	Self Incarnation
	// Rules are the rules the node enforces; each must be valid.
	Rules []window.Rule
	// Start is the moment (Unix nanoseconds) the replica starts at.
	Start int64
	// Phase delays every rule's first sync round past Start, so that nodes
	// started together still sync at different moments.
	Phase time.Duration
	// AskTimeout is how long a check waits for the answer of a key's owner
	// (owner allocation), 0 for no limit: a node whose round trip to an
	// owner is longer cannot ask it in time and lives on its grants alone.
	AskTimeout time.Duration
	// MaxKeys bounds the keys the replica holds, every rule's together,
	// wherever they come from (checks, peers' deltas, state pulls): a new
	// key past it evicts one held (see keycap.go). 0 or less: no bound.
	MaxKeys int
}

// Replica is one node's whole view of every rule's counts, and its side of
// the batched sync protocol: it decides requests, says which deltas are due
// to whom as time passes, and merges the deltas that arrive. Safe for
// concurrent use.
type Replica struct {
	self   Incarnation
	selfID uint32
	reg    *registry
	rtt    *roundTrips
	keyCap *keyCap // nil: no bound
	tables atomic.Pointer[map[string]*Table]

	mu    sync.Mutex // guards what follows
	order []*Table
	peers map[Incarnation]*peerState
	seq   uint64
	sweep []int64 // per table in order: next expiry pass when alone (sweepAfter)
	live  int32   // nodes live, this one included
	alive *[]bool // live incarnations by registry id
	fleet *fleet  // the live nodes keys of owner-allocated rules have owners among
	// fleetGen numbers every fleet a table is given, so that a key's
	// cached owner is worked out again whenever its table's fleet changes.
	fleetGen uint32
	// outsiders are, per owner-allocated rule, the peers that sync the
	// rule with everyone instead (it is strict or under another policy
	// there, as during a rolling reload): they own none of its keys, and
	// are sent this node's counts of it as a full-mesh peer would.
	outsiders map[string]map[uint32]bool
	// routedBuf and orderBuf are Tick's scratch, kept between rounds (up
	// to maxScratch entries) so that a round does not grow them anew.
	routedBuf []routed
	orderBuf  []int32
}

// maxScratch is the most entries of scratch a replica keeps between rounds.
const maxScratch = 4096

// tableFleet returns the fleet keys of t have owners among: the live
// members less t's outsiders; the caller holds r.mu.
func (r *Replica) tableFleet(t *Table) *fleet {
	r.fleetGen++
	out := r.outsiders[t.rule.Name]
	f := &fleet{gen: r.fleetGen}
	for i, id := range r.fleet.ids {
		if !out[id] {
			f.ids = append(f.ids, id)
			f.names = append(f.names, r.fleet.names[i])
		}
	}
	return f
}

// noteOutsider records, from the kind of a delta that carried rule from
// peer id, whether the peer syncs the rule with everyone or with keys'
// owners, and gives the rule's table a new fleet if that changed; the
// caller holds r.mu.
func (r *Replica) noteOutsider(t *Table, id uint32, d *Delta) {
	if t.rule.Allocation != window.Owner || t.rule.IsStrict() || d.Full || d.Kind == KindView || id == r.selfID {
		return
	}
	out := d.Kind == KindSync
	set := r.outsiders[t.rule.Name]
	if set[id] == out {
		return
	}
	if set == nil {
		set = map[uint32]bool{}
		r.outsiders[t.rule.Name] = set
	}
	if out {
		set[id] = true
	} else {
		delete(set, id)
	}
	if r.fleet != nil {
		t.fleet.Store(r.tableFleet(t))
	}
}

// peerState is what this node has sent to one peer: per rule, the epoch
// from which changes are still unsent (none recorded: everything is).
type peerState struct {
	since map[string]uint64
	// heard is the highest Seq received from the peer; sent is, by rule,
	// the Seq of the last delta to the peer that carried the rule.
	heard uint64
	sent  map[string]uint64
}

// Outbound is a delta due to one peer.
type Outbound struct {
	To    Incarnation
	Delta *Delta
}

// NewReplica returns a replica for cfg.
func NewReplica(cfg Config) (*Replica, error) {
	r := &Replica{self: cfg.Self, reg: newRegistry(), rtt: newRoundTrips(cfg.AskTimeout), keyCap: newKeyCap(cfg.MaxKeys),
		peers: make(map[Incarnation]*peerState), live: 1, outsiders: map[string]map[uint32]bool{}}
	r.selfID = r.reg.id(cfg.Self)
	cfg.Rules = window.WithDefaults(cfg.Rules)
	if err := validateRules(cfg.Rules); err != nil {
		return nil, err
	}
	tables := make(map[string]*Table, len(cfg.Rules))
	for i := range cfg.Rules {
		rule := cfg.Rules[i]
		t := newTable(rule, r.reg, r.rtt, r.selfID, r.keyCap)
		t.nextSync.Store(cfg.Start + int64(cfg.Phase))
		tables[rule.Name] = t
		r.order = append(r.order, t)
		r.sweep = append(r.sweep, sweepAfter(cfg.Start, rule.Window))
	}
	r.keyCap.setSets(keySets(r.order), nil)
	r.tables.Store(&tables)
	return r, nil
}

const maxTime = int64(^uint64(0) >> 1)

// Self returns the replica's incarnation.
func (r *Replica) Self() Incarnation { return r.self }

// Table returns the table of the named rule, or nil.
func (r *Replica) Table(rule string) *Table { return (*r.tables.Load())[rule] }

// Keys returns how many keys the replica's tables hold, every rule's
// together: what Config.MaxKeys bounds. It takes no lock.
func (r *Replica) Keys() int {
	n := 0
	for _, t := range *r.tables.Load() {
		n += t.Len()
	}
	return n
}

// Allow decides a check of hits on key under rule at moment now (Unix
// nanoseconds) and records the hits if admitted. It never waits on peers.
// Its decisions are not counted in the table's Tally: its callers (a
// strict rule's fail mode, the strict log's state machine, a simulator)
// count theirs as they need.
func (r *Replica) Allow(now int64, rule, key string, hits int64) (window.Decision, error) {
	t := (*r.tables.Load())[rule]
	if t == nil {
		return window.Decision{}, UnknownRule(rule)
	}
	if err := t.validate(key, hits); err != nil {
		return window.Decision{}, err
	}
	d := t.Allow(key, now, hits)
	d.At = now
	return d, nil
}

// Check reports the error Allow would return for a check, without deciding
// or recording anything.
func (r *Replica) Check(rule, key string, hits int64) error {
	t := (*r.tables.Load())[rule]
	if t == nil {
		return UnknownRule(rule)
	}
	return t.validate(key, hits)
}

// validate is what Check reports: check, and the key valid UTF-8.
func (t *Table) validate(key string, hits int64) error {
	if err := t.check(key, hits); err != nil {
		return err
	}
	if !utf8.ValidString(key) {
		return keyNotUTF8(key)
	}
	return nil
}

// check is validate but for the key's UTF-8, which a check decided at once
// leaves to try: a key the table holds was found valid when its slot was
// made, and reading its bytes on every check would cost 175 instructions
// more, 15 % (utf8.ValidString on the 7 bytes of BenchmarkAllow's key).
func (t *Table) check(key string, hits int64) error {
	switch {
	case key == "":
		return ErrEmptyKey
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrKeyTooLong, len(key), MaxKeyLen)
	case hits < 0:
		return fmt.Errorf("%w, got %d", ErrNegativeHits, hits)
	case hits > t.rule.Count:
		return fmt.Errorf("%w: hits %d, rule %q count %d", ErrHitsOverCount, hits, t.rule.Name, t.rule.Count)
	}
	return nil
}

// SetRules replaces the rule set at moment now. A rule whose window length
// and type are unchanged keeps its counts, its own and its peers', whatever
// else changes: its count, its sync interval, its allocation, or whether it
// is batched or strict. A rule whose window changed starts empty; a rule no
// longer present is dropped.
func (r *Replica) SetRules(rules []window.Rule, now int64) error {
	rules = window.WithDefaults(rules)
	if err := validateRules(rules); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.tables.Load()
	sweeps := make(map[string]int64, len(r.order))
	for i, t := range r.order {
		sweeps[t.rule.Name] = r.sweep[i]
	}
	tables := make(map[string]*Table, len(rules))
	order := make([]*Table, 0, len(rules))
	sweep := make([]int64, 0, len(rules))
	for _, rule := range rules {
		ot := old[rule.Name]
		var t *Table
		switch {
		case ot != nil && ot.rule.Equal(rule):
			t = ot
		case ot != nil && ot.rule.Window == rule.Window && ot.rule.Type == rule.Type:
			t = ot.successor(rule)
			t.earlier = ot.earlier.after(ot.rule, rule, window.Index(now, rule.Window))
		default:
			t = newTable(rule, r.reg, r.rtt, r.selfID, r.keyCap)
			t.live.Store(r.live)
			t.aliveBy.Store(r.alive)
			if ot != nil {
				// The counts start afresh, the decisions and evictions
				// counted go on.
				t.tallied, t.evictedBefore = ot.Tally(), ot.Evicted()
			}
		}
		if ot != nil && (ot.rule.Allocation != rule.Allocation || ot.rule.IsStrict() != rule.IsStrict()) {
			// The rule now syncs another way: every peer gets all of this
			// node's counts of it at the next round, which also tells
			// peers that own its keys how this node syncs it.
			for _, ps := range r.peers {
				delete(ps.since, rule.Name)
			}
			if t.rule.Allocation == window.Owner {
				t.remark()
			}
		}
		if r.fleet != nil && t != ot {
			t.fleet.Store(r.tableFleet(t))
		}
		if ot == nil || ot.syncEvery() != t.syncEvery() {
			t.nextSync.Store(now + int64(t.syncEvery()))
		}
		tables[rule.Name] = t
		order = append(order, t)
		if sw, ok := sweeps[rule.Name]; ok && t.rule.Window == ot.rule.Window {
			sweep = append(sweep, sw)
		} else {
			sweep = append(sweep, sweepAfter(now, rule.Window))
		}
	}
	r.order, r.sweep = order, sweep
	r.tables.Store(&tables)
	// The keys of tables no longer used count no more: a check still
	// holding one of them may add a key there, which nothing counts or
	// bounds, and which goes with the table.
	kept := keySets(order)
	var dropped []*keySet
	for _, ot := range old {
		if !slices.Contains(kept, ot.keys) {
			dropped = append(dropped, ot.keys)
		}
	}
	r.keyCap.setSets(kept, dropped)
	return nil
}

// keySets returns the key sets of tables.
func keySets(tables []*Table) []*keySet {
	out := make([]*keySet, len(tables))
	for i, t := range tables {
		out[i] = t.keys
	}
	return out
}

func validateRules(rules []window.Rule) error {
	seen := make(map[string]bool, len(rules))
	for i := range rules {
		if err := rules[i].ValidatePart(); err != nil {
			return fmt.Errorf("rule %d (%q): %w", i+1, rules[i].Name, err)
		}
		if seen[rules[i].Name] {
			return fmt.Errorf("rule %d: name %q is used twice", i+1, rules[i].Name)
		}
		seen[rules[i].Name] = true
	}
	return nil
}

// SetPeers replaces the set of live peers. A new peer is sent every own
// entry at the next round, and, for the keys this node owns, the fleet's
// counts again: what was told while it was not live never reached it. A
// peer that left is no longer sent to, but what it admitted stays counted
// until its windows expire.
func (r *Replica) SetPeers(peers []Incarnation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[Incarnation]*peerState, len(peers))
	var joined []uint32
	for _, p := range peers {
		if p == r.self {
			continue
		}
		if ps, ok := r.peers[p]; ok {
			next[p] = ps
			continue
		}
		next[p] = &peerState{since: make(map[string]uint64, len(r.order)), sent: make(map[string]uint64, len(r.order))}
		joined = append(joined, r.reg.id(p))
	}
	defer func() {
		// After the tables count the new peers live, so that the next
		// round tells them.
		for _, id := range joined {
			for _, t := range r.order {
				t.resendTo(id)
			}
		}
	}()
	for p := range r.peers {
		if _, ok := next[p]; !ok {
			r.rtt.forget(r.reg.id(p))
		}
	}
	r.peers = next
	alive := make([]bool, 0, len(next)+1)
	mark := func(id uint32) {
		for int(id) >= len(alive) {
			alive = append(alive, false)
		}
		alive[id] = true
	}
	mark(r.selfID)
	for p := range next {
		mark(r.reg.id(p))
	}
	r.live, r.alive = int32(len(next)+1), &alive
	f := &fleet{ids: []uint32{r.selfID}, names: []uint64{hashString(r.self.Node)}}
	for p := range next {
		f.ids = append(f.ids, r.reg.id(p))
		f.names = append(f.names, hashString(p.Node))
	}
	r.fleet = f
	for _, t := range r.order {
		t.live.Store(r.live)
		t.aliveBy.Store(r.alive)
		t.fleet.Store(r.tableFleet(t))
	}
}

// ResendAll makes the next round send peer every own entry again, as after a
// broken connection that may have lost deltas.
func (r *Replica) ResendAll(peer Incarnation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ps, ok := r.peers[peer]; ok {
		clear(ps.since)
	}
	id := r.reg.id(peer)
	for _, t := range r.order {
		t.resendTo(id)
	}
}

// ClockStepped tells the replica that the node's clock jumped to now (a
// correction, or a step back): rounds and expiry passes scheduled further
// ahead than one interval from now are brought back to now, so that a
// clock that moved back does not stall sync until it catches up.
func (r *Replica) ClockStepped(now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, t := range r.order {
		if t.nextSync.Load() > now+int64(t.syncEvery()) {
			t.nextSync.Store(now)
		}
		if r.sweep[i] > now+int64(t.rule.Window) {
			r.sweep[i] = now
		}
	}
}

// NextTick returns when Tick next has work to do.
func (r *Replica) NextTick() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := maxTime
	for i, t := range r.order {
		if len(r.peers) > 0 {
			next = min(next, t.nextSync.Load())
		} else {
			next = min(next, r.sweep[i])
		}
	}
	return next
}

// Tick runs the sync rounds due at moment now and returns the deltas to send.
// Rules with different sync intervals share one delta per peer when their
// rounds fall together.
func (r *Replica) Tick(now int64) []Outbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	peers := r.sortedPeers()
	perPeer := make([][]RuleDelta, len(peers))
	reports := r.routedBuf[:0]
	for i, t := range r.order {
		due := t.nextSync.Load() <= now
		if len(peers) == 0 {
			if now >= r.sweep[i] {
				t.round(now, 0, t.epoch.Load(), false)
				r.sweep[i] = sweepAfter(now, t.rule.Window)
			}
			if due {
				t.nextSync.Store(nextRound(t.nextSync.Load(), t.syncEvery(), now))
			}
			continue
		}
		if !due {
			continue
		}
		t.nextSync.Store(nextRound(t.nextSync.Load(), t.syncEvery(), now))
		name := t.rule.Name
		// Changes stamped with the old epoch that land after the pass are
		// stamped with the new one once it is visible, so nothing is missed.
		next := t.epoch.Add(1)
		meshed := peers
		if t.owns() {
			reports = t.roundOwned(now, next-1, reports)
			out := r.outsiders[name]
			if len(out) == 0 {
				continue
			}
			// Peers that sync the rule with everyone get this node's
			// counts as from a full-mesh peer, beside the reports.
			meshed = nil
			for _, p := range peers {
				if out[r.reg.id(p)] {
					meshed = append(meshed, p)
				}
			}
		}
		minSince := ^uint64(0)
		for _, p := range meshed {
			minSince = min(minSince, r.peers[p].since[name])
		}
		collected := t.round(now, minSince, next-1, true)
		for j, p := range peers {
			if len(meshed) != len(peers) && !slices.Contains(meshed, p) {
				continue
			}
			ps := r.peers[p]
			entries := filterSince(collected, ps.since[name], minSince)
			ps.since[name] = next
			if len(entries) > 0 {
				perPeer[j] = append(perPeer[j], RuleDelta{Rule: t.rule.Name, Entries: entries})
			}
		}
	}
	var out []Outbound
	if len(reports) > 0 {
		out = r.reportsTo(reports, now, out)
	}
	// The deltas hold copies of the entries, not the scratch itself. A
	// scratch as large as the keys a node holds is not kept: it would cost
	// more memory per key than the key itself.
	if cap(reports) <= maxScratch {
		clear(reports)
		r.routedBuf = reports[:0]
	} else {
		r.routedBuf = nil
	}
	for j, p := range peers {
		if len(perPeer[j]) == 0 {
			continue
		}
		r.seq++
		ps := r.peers[p]
		for _, rd := range perPeer[j] {
			ps.sent[rd.Rule] = r.seq
		}
		out = append(out, Outbound{To: p, Delta: &Delta{
			From: r.self, Seq: r.seq, Ack: ps.heard, Incarnations: []Incarnation{r.self},
			Live: len(peers) + 1, Rules: perPeer[j],
		}})
	}
	return out
}

// sweepAfter is when a lone replica next expires keys of a rule whose
// windows are w long, after moment now: at the next window boundary, when
// the keys last counted two windows before have nothing left in the
// current window or the one before. A key so leaves within two windows of
// its last hit.
func sweepAfter(now int64, w time.Duration) int64 {
	return window.Start(window.Index(now, w)+1, w)
}

func nextRound(due int64, every time.Duration, now int64) int64 {
	next := due + int64(every)
	if next <= now {
		// Rounds were missed (a stalled process): resume from now rather
		// than firing a burst of catch-up rounds.
		next = now + int64(every)
	}
	return next
}

func (r *Replica) sortedPeers() []Incarnation {
	peers := make([]Incarnation, 0, len(r.peers))
	for p := range r.peers {
		peers = append(peers, p)
	}
	sort.Slice(peers, func(i, j int) bool {
		if peers[i].Node != peers[j].Node {
			return peers[i].Node < peers[j].Node
		}
		return peers[i].Boot < peers[j].Boot
	})
	return peers
}

func filterSince(all []stamped, since, minSince uint64) []Entry {
	out := make([]Entry, 0, len(all))
	for i := range all {
		if since == minSince || changedSince(all[i].ver, since) {
			out = append(out, all[i].Entry)
		}
	}
	return out
}

// Receive merges a delta or snapshot a peer sent, unasked, at moment now:
// ReceiveFrom with the zero Origin.
func (r *Replica) Receive(now int64, d *Delta) (ReceiveResult, error) {
	return r.ReceiveFrom(now, d, Origin{})
}

// ReceiveFrom merges a delta or snapshot that arrived at moment now, from
// origin o. Entries for rules this node does not have are skipped and named
// in the result; a malformed delta is rejected whole with an error naming
// the sender.
//
// Each entry is vetted before anything of it is merged, and one that fails
// is rejected and counted by its Reason, changing nothing: one that names
// an incarnation neither the sender nor known to this node (but in state it
// asked for), one for a window more than one ahead, and one whose counts
// exceed what could have been admitted. Entries are rejected one by one,
// not with the delta: a real node's delta can hold one that fails (a clock
// briefly more than a window ahead, a count admitted under a rule this node
// has since lowered) beside counts that are right, and a node sends an
// entry again only when it changes, so the rest would be lost.
//
// What one incarnation can have admitted of a key in a window is the
// rule's count: every way a node admits hits (its view under classic or
// adaptive allocation; its grant, its opening or its view under owner
// allocation; a strict rule's fail-local answers; its share of what was
// left once an owner is lost) decides against a view that holds its own
// count, a grant never reaches past the count, and a check's hits are at
// most the count. A refusal in shadow mode and a fail-open answer admit
// without counting; a refund lowers a count, and peers keep the most it
// was, which was within the count. Only a reload lowers the count under
// counts already admitted: windows up to the reload's are held to the
// count before it. A sender with other rules (o.OtherRules) is held to
// window.MaxCount, and state this node asked for (o.Asked) to none. The
// fleet's count in a window is at most that bound for each incarnation
// this node knows of, which is what an owner's answer (every incarnation
// but the receiver) and a view (all of them) may say. A replayed delta
// changes nothing: counts merge by maximum, claims and answers by their
// sequence.
func (r *Replica) ReceiveFrom(now int64, d *Delta, o Origin) (ReceiveResult, error) {
	var res ReceiveResult
	for i, inc := range d.Incarnations {
		if inc.Node == "" {
			return res, fmt.Errorf("delta from %q: incarnation %d has no node name", d.From.Node, i)
		}
	}
	for _, rd := range d.Rules {
		for _, e := range rd.Entries {
			if int(e.Inc) >= len(d.Incarnations) {
				return res, fmt.Errorf("delta from %q: rule %q key %q names incarnation %d of %d",
					d.From.Node, rd.Rule, e.Key, e.Inc, len(d.Incarnations))
			}
		}
	}
	fromID := r.reg.id(d.From)
	ids := r.incarnationIDs(d, fromID, o)
	v := &vetting{now: now, origin: o, kind: d.Kind, ids: ids, incs: int64(r.reg.len())}
	tables := *r.tables.Load()
	if d.Kind == KindView {
		return r.receiveViews(now, d, v), nil
	}
	if d.Kind == KindAnswer {
		told := uint64(0)
		for _, rd := range d.Rules {
			t := tables[rd.Rule]
			for i := range rd.Entries {
				if e := &rd.Entries[i]; t != nil && ids[e.Inc] == fromID {
					if _, bad := v.check(t, e); !bad {
						told = max(told, e.Told)
					}
				}
			}
		}
		r.rtt.answered(fromID, told, now)
	}
	// A rule whose last round the sender had not heard of when it built
	// this delta: its claims and this node's were made without each other.
	// Of two nodes whose claims crossed, the one that sorts later yields.
	var unseen map[string]bool
	r.mu.Lock()
	if ps := r.peers[d.From]; ps != nil && !d.Full {
		ps.heard = max(ps.heard, d.Seq)
		for _, rd := range d.Rules {
			if d.Ack < ps.sent[rd.Rule] && before(d.From, r.self) {
				if unseen == nil {
					unseen = map[string]bool{}
				}
				unseen[rd.Rule] = true
			}
		}
	}
	r.mu.Unlock()
	var answers []routed
	if d.Kind == KindReport {
		answers = make([]routed, 0, d.Size())
	}
	r.mu.Lock()
	for _, rd := range d.Rules {
		if t := tables[rd.Rule]; t != nil {
			r.noteOutsider(t, fromID, d)
		}
	}
	r.mu.Unlock()
	for _, rd := range d.Rules {
		t := tables[rd.Rule]
		if t == nil {
			res.UnknownRules = append(res.UnknownRules, rd.Rule)
			continue
		}
		owns := t.owns()
		for i := range rd.Entries {
			e := &rd.Entries[i]
			if e.Key == "" || len(e.Key) > MaxKeyLen {
				res.Dropped++
				continue
			}
			if why, bad := v.check(t, e); bad {
				res.Rejected[why]++
				continue
			}
			id := ids[e.Inc]
			var ok bool
			switch {
			case owns && d.Kind == KindAnswer:
				ok = id == fromID && t.applyAnswer(e, now)
			case owns && d.Kind == KindReport && id == fromID:
				var a Entry
				if a, ok = t.report(id, e, now, d.Seq); ok {
					answers = append(answers, routed{to: fromID, inc: r.selfID, kind: KindAnswer, rule: rd.Rule, e: a})
				}
			case owns && d.Kind == KindStandby && id == fromID:
				ok = t.hold(id, e, now)
			case owns:
				// Counts of other incarnations: passed on in a report or
				// sent to this node as a key's standby, kept here; from a
				// snapshot or a peer syncing with everyone, passed on to
				// the key's owner.
				ok = t.mergeForeign(id, e, now, d.Kind == KindReport || d.Kind == KindStandby)
			case d.Kind == KindAnswer:
				// Answers mean nothing to a rule this node shares with
				// everyone.
			case d.Kind == KindReport || d.Kind == KindStandby:
				// A peer still treating the rule as owner-allocated: its
				// report or copy holds counts.
				ok = t.merge(id, e, now, false, d.Seq, false)
				if e.Prev > 0 {
					prev := Entry{Key: e.Key, Window: e.Window - 1, Admitted: e.Prev}
					t.merge(id, &prev, now, false, d.Seq, false)
				}
			default:
				ok = t.merge(id, e, now, !d.Full && id == fromID, d.Seq, unseen[rd.Rule])
			}
			if ok {
				res.Merged++
			} else {
				res.Dropped++
			}
		}
	}
	if len(answers) > 0 {
		r.mu.Lock()
		reply := r.reportDelta(answers)
		r.mu.Unlock()
		res.Reply = &Outbound{To: d.From, Delta: reply}
	}
	return res, nil
}

// ReceiveResult says what Receive did with a delta.
type ReceiveResult struct {
	// Merged entries were folded into the view (whether or not they raised
	// any count).
	Merged int
	// Dropped entries were expired, this node's own, for a key no slot may
	// hold, or of no use to this node (an answer about a rule it shares
	// with everyone, for a window its owner-allocated keys have not
	// reached).
	Dropped int
	// Rejected are the entries refused by vetting, by Reason: none of them
	// changed anything.
	Rejected [NumReasons]int
	// UnknownRules are rules in the delta that this node does not have: a
	// sign of configuration drift.
	UnknownRules []string
	// Reply is what to send back at once: an owner's answer to a report.
	Reply *Outbound
}

// Snapshot returns every count this node holds for live windows at moment
// now, its own and every peer's, for a joining or restarted node to start
// from.
func (r *Replica) Snapshot(now int64) *Delta {
	r.mu.Lock()
	order := r.order
	r.mu.Unlock()
	d := &Delta{From: r.self, Full: true}
	for _, t := range order {
		entries := t.snapshot(now, nil)
		if len(entries) > 0 {
			d.Rules = append(d.Rules, RuleDelta{Rule: t.rule.Name, Entries: entries})
		}
	}
	// Listed after the pass so that every id an entry uses is in the list.
	d.Incarnations = r.reg.list()
	return d
}

// before orders incarnations by node name, then boot.
func before(a, b Incarnation) bool {
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	return a.Boot < b.Boot
}
