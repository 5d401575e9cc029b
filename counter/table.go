package counter

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/window"
)

const shardCount = 64

// maxEntry bounds a count a peer may report, so that sums over many peers
// cannot overflow: a peer claiming more is broken or hostile.
const maxEntry = int64(1) << 52

// Table holds every key's counts for one rule in one node's view. It is safe
// for concurrent use; keys are spread over shards with a lock each, so
// admission on different keys does not contend.
type Table struct {
	rule   window.Rule
	self   uint32 // this incarnation's id in reg
	reg    *registry
	seed   maphash.Seed
	policy policy

	// epoch numbers sync rounds; own changes are stamped with it so that a
	// delta holds only what changed since the last send.
	epoch atomic.Uint64
	// live is how many nodes share the rule, this one included, and alive
	// which incarnations (by registry id) those are.
	live    atomic.Int32
	aliveBy atomic.Pointer[[]bool]
	// nextSync is when the next sync round is due (Unix nanoseconds); a
	// refusal by allocation can be retried then.
	nextSync atomic.Int64

	// shards hold the keys. A table that replaces another for a changed
	// rule with the same window shares them, so a check that still holds
	// the old table counts in the same place.
	shards *[shardCount]shard
}

type shard struct {
	mu    sync.Mutex
	index map[string]int32
	slots []slot
	free  []int32
	_     [64]byte // keeps neighbouring shards' locks off one cache line
}

func newTable(rule window.Rule, reg *registry, self uint32) *Table {
	t := &Table{rule: rule, reg: reg, self: self, seed: maphash.MakeSeed(), shards: new([shardCount]shard)}
	t.policy = policyFor(rule.Allocation)
	t.epoch.Store(1)
	t.live.Store(1)
	for i := range t.shards {
		t.shards[i].index = make(map[string]int32)
	}
	return t
}

// successor returns a table for rule, which has old's window length and
// type, holding old's keys and counts: own, peers' and their versions carry
// over; allocation state starts afresh, as the policy or budget may differ.
func (old *Table) successor(rule window.Rule) *Table {
	t := &Table{rule: rule, reg: old.reg, self: old.self, seed: old.seed, shards: old.shards}
	t.policy = policyFor(rule.Allocation)
	t.epoch.Store(old.epoch.Load())
	t.live.Store(old.live.Load())
	t.aliveBy.Store(old.aliveBy.Load())
	t.nextSync.Store(old.nextSync.Load())
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.slots {
			if x := sh.slots[j].x; x != nil {
				x.alloc.reset(rule.Count, sh.slots[j].own)
			}
		}
		sh.mu.Unlock()
	}
	return t
}

// alive returns a test for whether an incarnation id is live.
func (t *Table) alive() func(uint32) bool {
	p := t.aliveBy.Load()
	if p == nil {
		return func(uint32) bool { return false }
	}
	set := *p
	return func(id uint32) bool { return int(id) < len(set) && set[id] }
}

// Rule returns the rule the table counts for.
func (t *Table) Rule() window.Rule { return t.rule }

func (t *Table) shardOf(key string) *shard {
	return &t.shards[maphash.String(t.seed, key)%shardCount]
}

// lookup returns the slot for key, creating it if create is set; the caller
// holds sh.mu.
func (sh *shard) lookup(key string, idx int64, create bool) *slot {
	if i, ok := sh.index[key]; ok {
		return &sh.slots[i]
	}
	if !create {
		return nil
	}
	// Clone so that a key sliced from a large request buffer does not pin it.
	key = strings.Clone(key)
	var i int32
	if n := len(sh.free); n > 0 {
		i = sh.free[n-1]
		sh.free = sh.free[:n-1]
	} else {
		sh.slots = append(sh.slots, slot{})
		i = int32(len(sh.slots) - 1)
	}
	sh.slots[i] = slot{key: key, idx: idx}
	sh.index[key] = i
	return &sh.slots[i]
}

// Allow decides whether hits for key fit at moment now and records them if
// they do. hits must be in [0, Count]; the Replica checks that.
func (t *Table) Allow(key string, now, hits int64) window.Decision {
	idx, elapsed := window.Position(now, t.rule.Window)
	live := t.live.Load()
	sh := t.shardOf(key)
	sh.mu.Lock()
	s := sh.lookup(key, idx, true)
	s.roll(idx)
	if s.x == nil && live > 1 {
		s.x = t.newShared(s)
	}
	d := t.decide(s, now, idx, elapsed, hits, live)
	sh.mu.Unlock()
	return d
}

// StrictShareInterval is how often a node shares the counts it holds for a
// strict rule outside the log: fail-local admissions, and counts that peers
// still treating the rule as batched report during a rolling reload. Peers
// then decide their own fail-local answers, and the strict leader its log,
// with them in view instead of from zero.
const StrictShareInterval = 100 * time.Millisecond

// syncEvery is how often the table's sync rounds run.
func (t *Table) syncEvery() time.Duration {
	if t.rule.IsStrict() {
		return StrictShareInterval
	}
	return t.rule.SyncInterval
}

// decide runs with the shard locked and the slot rolled to idx or beyond.
func (t *Table) decide(s *slot, now, idx int64, elapsed time.Duration, hits int64, live int32) window.Decision {
	own, view := s.counts(idx)
	p := s.pos(idx)
	var d window.Decision
	if live > 1 && s.x != nil && p >= 0 && !t.rule.IsStrict() {
		d = t.policy.decide(t, s, own, view, moment{now: now, idx: idx, elapsed: elapsed}, hits)
	} else {
		// Alone, the view is exact: own counts plus whatever departed peers
		// admitted in these windows.
		d = t.rule.DecideAt(view, elapsed, hits)
	}
	if p < 0 {
		// The clock is more than a window behind what peers reported: decide,
		// but there is no window left to record the hits in.
		return d
	}
	if hits > 0 {
		if s.x != nil {
			s.x.demand[p] += hits
		}
		if d.Allowed {
			s.own[p] += hits
			s.ver[p] = t.epoch.Load()
		}
	}
	return d
}

func (t *Table) newShared(s *slot) *shared {
	x := &shared{}
	x.alloc.reset(t.rule.Count, s.own)
	return x
}

// Counts returns this incarnation's exact counts for key at moment now, and
// the whole view: what this node believes the fleet admitted, counting
// itself as its peers count it. Nothing is recorded.
func (t *Table) Counts(key string, now int64) (own, view window.Counts) {
	idx := window.Index(now, t.rule.Window)
	sh := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(key, idx, false)
	if s == nil {
		return own, view
	}
	s.roll(idx)
	own, view = s.counts(idx)
	if s.x != nil && t.live.Load() > 1 && s.pos(idx) == 1 {
		pub := t.policy.published(s)
		pub[1] += t.policy.unpublished(s)
		view.Prev += pub[0] - s.own[0]
		view.Curr += pub[1] - s.own[1]
	}
	return own, view
}

// Len returns the number of keys the table holds.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.index)
		sh.mu.Unlock()
	}
	return n
}

// merge folds one entry from incarnation inc into the table. Entries more
// than one window ahead of now come from a clock too far ahead to trust and
// are dropped, as are entries already expired; merge reports whether the
// entry was used. hasNews says the entry is its sender's own, with its
// allocation news; crossed, that the sender made that news without this
// node's latest round, so the policy may have to give some of its claim
// back.
func (t *Table) merge(inc uint32, e *Entry, now int64, hasNews bool, seq uint64, crossed bool) bool {
	if inc == t.self || e.Admitted < 0 || e.Demand < 0 || e.Admitted > maxEntry || e.Demand > maxEntry {
		return false
	}
	idx := window.Index(now, t.rule.Window)
	if e.Window > idx+1 || e.Window < idx-1 {
		return false
	}
	sh := t.shardOf(e.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(e.Key, max(idx, e.Window), true)
	s.roll(max(idx, e.Window))
	p := s.pos(e.Window)
	if p < 0 {
		return false
	}
	if s.x == nil {
		s.x = t.newShared(s)
	}
	s.x.mergePeer(inc, p, e.Admitted, e.Demand)
	if hasNews && e.Claim >= 0 && e.Claim <= maxEntry && e.Need >= 0 && e.Need <= maxEntry && e.Opening >= 0 && e.Opening <= maxEntry {
		s.x.announce(inc, e.Window, news{claim: e.Claim, need: e.Need, opening: e.Opening, opens: e.Opens}, now, seq)
		if crossed {
			t.policy.crossed(t, s, now)
		}
	}
	return true
}

// round is one pass over the table at a sync: it expires old keys, lets the
// allocation policy take its new budgets, and collects this incarnation's
// entries changed at or after epoch since.
func (t *Table) round(now int64, since, epoch uint64, collect bool) []stamped {
	idx := window.Index(now, t.rule.Window)
	live := t.live.Load()
	var out []stamped
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.slots {
			s := &sh.slots[j]
			if s.key == "" {
				continue
			}
			s.roll(idx)
			if s.idx < idx-1 || s.empty() {
				sh.remove(int32(j))
				continue
			}
			if live > 1 && s.x != nil {
				t.policy.sync(t, s, now, idx, epoch)
			}
			if collect {
				out = t.appendOwn(out, s, since)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// empty reports whether nothing is held for the slot's windows.
func (s *slot) empty() bool {
	if s.own != [2]int64{} {
		return false
	}
	return s.x == nil || s.x.demand == [2]int64{} && len(s.x.peers) == 0
}

func (sh *shard) remove(i int32) {
	delete(sh.index, sh.slots[i].key)
	sh.slots[i] = slot{}
	sh.free = append(sh.free, i)
}

// stamped is an own entry with the epoch it last changed in.
type stamped struct {
	Entry
	ver uint64
}

func (t *Table) appendOwn(out []stamped, s *slot, since uint64) []stamped {
	own := t.ownPublished(s)
	for p := range 2 {
		if s.ver[p] == 0 || s.ver[p] < since {
			continue
		}
		e := stamped{Entry: Entry{Key: s.key, Window: s.idx - 1 + int64(p), Admitted: own[p]}, ver: s.ver[p]}
		if s.x != nil {
			e.Demand = s.x.demand[p]
			if p == 1 && t.live.Load() > 1 {
				n := t.policy.announce(s)
				e.Claim, e.Need, e.Opening, e.Opens = n.claim, n.need, n.opening, n.opens
			}
		}
		out = append(out, e)
	}
	return out
}

// ownPublished is what peers are told this incarnation admitted: its exact
// counts, unless the policy publishes otherwise.
func (t *Table) ownPublished(s *slot) [2]int64 {
	if s.x != nil && t.live.Load() > 1 {
		return t.policy.published(s)
	}
	return s.own
}

// snapshot appends every incarnation's entries for the live windows at now.
func (t *Table) snapshot(now int64, out []Entry) []Entry {
	idx := window.Index(now, t.rule.Window)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.slots {
			s := &sh.slots[j]
			if s.key == "" {
				continue
			}
			s.roll(idx)
			own := t.ownPublished(s)
			for p := range 2 {
				w := s.idx - 1 + int64(p)
				if own[p] > 0 || s.x != nil && s.x.demand[p] > 0 {
					e := Entry{Key: s.key, Window: w, Inc: t.self, Admitted: own[p]}
					if s.x != nil {
						e.Demand = s.x.demand[p]
					}
					out = append(out, e)
				}
				if s.x == nil {
					continue
				}
				for _, pe := range s.x.peers {
					if pe.adm[p] > 0 || pe.dem[p] > 0 {
						out = append(out, Entry{Key: s.key, Window: w, Inc: pe.inc, Admitted: pe.adm[p], Demand: pe.dem[p]})
					}
				}
			}
		}
		sh.mu.Unlock()
	}
	return out
}
