package counter

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	rtt    *roundTrips // round trips to keys' owners, shared by the tables
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
	// fleet is the members keys have owners among (owner allocation).
	fleet atomic.Pointer[fleet]

	// keys are the table's keys, and shards their shards. A table that
	// replaces another for a changed rule with the same window shares
	// them, so a check that still holds the old table counts in the same
	// place.
	keys   *keySet
	shards *[shardCount]shard
	// tallied and evictedBefore are what the tables this one replaced for
	// a changed window had tallied and evicted, which its own shards do
	// not hold.
	tallied       Tally
	evictedBefore uint64
	// earlier is the count the rule had before a reload lowered it, for
	// the windows admitted under it (see Replica.ReceiveFrom).
	earlier earlierCount
}

type shard struct {
	mu    sync.Mutex
	seed  maphash.Seed // the table's
	keys  keyIndex
	slots []slot
	free  []int32
	// tally counts the shard's tallied decisions by outcome (see Tally):
	// plain integers on the cache line of the lock the decision already
	// holds, so that counting costs a check an add, not a shared atomic.
	tally [outcomes]uint64
	// set is the key set the shard belongs to, and lim the bound its keys
	// count against (nil: none, or no longer: its table was dropped).
	set *keySet
	lim *keyCap
	// ref holds a bit per slot, set when its key is looked up and cleared
	// by the clock hand, which is at slot hand (see keycap.go); evicted
	// counts the keys the hand evicted.
	ref     []uint64
	hand    int32
	evicted uint64
	_       [64]byte // keeps neighbouring shards' locks off one cache line
}

// Tally counts the decisions a table made through Replica.Decide,
// DecideAgain and Settle for checks that brought no ticket: a node's
// plain checks on the rule's local path, the one a node makes most, which
// it can count this way for the price of an add under the lock the
// decision holds. Its callers count the other checks themselves: those
// that bring a ticket (a reservation, a part of a larger check) and those
// of Allow and Reserve. A check left undecided for a key's owner is
// counted once, when settled.
type Tally struct {
	// Admitted and Refused are the checks admitted and refused;
	// ShadowRefused the refusals of a rule in shadow mode
	// (window.Rule.Shadow), whose callers are admitted all the same.
	Admitted, Refused, ShadowRefused uint64
}

// Outcomes of a decision, as a shard tallies them.
const (
	outAdmitted = iota
	outRefused
	outShadowRefused
	outcomes
)

// add returns the sum of two tallies.
func (a Tally) add(b Tally) Tally {
	return Tally{Admitted: a.Admitted + b.Admitted, Refused: a.Refused + b.Refused,
		ShadowRefused: a.ShadowRefused + b.ShadowRefused}
}

// Tally returns the decisions the table has tallied, those of the tables
// it replaced for the same rule included, so that the figures only grow
// across reloads. A replaced table's checks still in flight when its
// successor was made are not carried over: a reload that changes a
// rule's window may lose a few.
func (t *Table) Tally() Tally {
	out := t.tallied
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		out = out.add(Tally{Admitted: sh.tally[outAdmitted], Refused: sh.tally[outRefused],
			ShadowRefused: sh.tally[outShadowRefused]})
		sh.mu.Unlock()
	}
	return out
}

// count tallies a decision that admitted or not; the caller holds sh.mu.
// It takes the verdict alone, not the decision: a decision whose address
// is taken is copied out of registers onto the stack.
func (t *Table) count(sh *shard, admitted bool) {
	switch {
	case admitted:
		sh.tally[outAdmitted]++
	case t.rule.Shadow:
		sh.tally[outShadowRefused]++
	default:
		sh.tally[outRefused]++
	}
}

// hashAt is the hash of the key in the slot at position i.
func (sh *shard) hashAt(i int32) uint64 { return maphash.String(sh.seed, sh.slots[i].key) }

// newTable returns an empty table for rule, whose keys count against c
// (nil: no bound).
func newTable(rule window.Rule, reg *registry, rtt *roundTrips, self uint32, c *keyCap) *Table {
	t := &Table{rule: rule, reg: reg, rtt: rtt, self: self, seed: maphash.MakeSeed()}
	t.keys = newKeySet(rule.Window, t.seed, c)
	t.shards = &t.keys.shards
	t.policy = policyFor(rule.Allocation)
	t.epoch.Store(1)
	t.live.Store(1)
	return t
}

// successor returns a table for rule, which has old's window length and
// type, holding old's keys and counts: own, peers' and their versions carry
// over; allocation state starts afresh, as the policy or budget may differ.
func (old *Table) successor(rule window.Rule) *Table {
	t := &Table{rule: rule, reg: old.reg, rtt: old.rtt, self: old.self, seed: old.seed, keys: old.keys, shards: old.shards,
		tallied: old.tallied, evictedBefore: old.evictedBefore}
	t.policy = policyFor(rule.Allocation)
	t.epoch.Store(old.epoch.Load())
	t.live.Store(old.live.Load())
	t.aliveBy.Store(old.aliveBy.Load())
	t.fleet.Store(old.fleet.Load())
	t.nextSync.Store(old.nextSync.Load())
	// Grants made before the rule synced another way stand for room that
	// other nodes may since have spent under that way (a strict log, say):
	// they lapse, and every node asks again.
	lapse := old.rule.Allocation != rule.Allocation || old.rule.IsStrict() != rule.IsStrict()
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.slots {
			s := &sh.slots[j]
			if x := s.x; x != nil {
				x.alloc.reset(rule.Count, s.own)
			}
			if o := s.o; o != nil && lapse {
				o.lapse(s)
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

// shardOf returns key's shard and the key's hash, which finds it there.
func (t *Table) shardOf(key string) (*shard, uint64) {
	h := maphash.String(t.seed, key)
	return &t.shards[h%shardCount], h
}

// lookup returns the slot for key, whose hash is h, or nil if the shard
// holds none, and marks the key used for the clock hand (keycap.go); the
// caller holds sh.mu.
func (sh *shard) lookup(key string, h uint64) *slot {
	i, ok := sh.keys.find(h, key, sh.slots)
	if !ok {
		return nil
	}
	// Read first: a key checked again and again dirties no line.
	if w, bit := &sh.ref[i>>6], uint64(1)<<(i&63); *w&bit == 0 {
		*w |= bit
	}
	return &sh.slots[i]
}

// slotOf returns the slot for key, whose hash is h, in sh, which the
// caller holds, making it, with idx its newest window, if the shard holds
// none: nil only for a key that is not valid UTF-8, when the shard holds
// maxShardSlots keys, or when the replica holds Config.MaxKeys and no key
// could be evicted for it (see keycap.go).
//
// A slot is made here alone, so every key a table holds is valid UTF-8,
// as the wire and the store need, and a check of a key the table holds
// need not read the key's bytes again (see Table.check).
func (t *Table) slotOf(sh *shard, key string, h uint64, idx, now int64) *slot {
	if s := sh.lookup(key, h); s != nil {
		return s
	}
	return t.insert(sh, key, h, idx, now)
}

// insert is slotOf for a key the shard does not hold.
func (t *Table) insert(sh *shard, key string, h uint64, idx, now int64) *slot {
	if !utf8.ValidString(key) || len(sh.free) == 0 && len(sh.slots) >= maxShardSlots {
		return nil
	}
	if c := sh.lim; c != nil && c.held.Add(1) > c.max && !c.makeRoom(t.keys, sh, int(h%shardCount), now) {
		c.held.Add(-1)
		return nil
	}
	// Clone so that a key sliced from a large request buffer does not pin it.
	key = strings.Clone(key)
	var i int32
	if n := len(sh.free); n > 0 {
		i = sh.free[n-1]
		sh.free = sh.free[:n-1]
	} else {
		if len(sh.slots) == cap(sh.slots) {
			// Grown by a sixteenth, not doubled: a table of a million keys
			// then leaves a few percent of its slots unused, not a quarter.
			grown := make([]slot, len(sh.slots), len(sh.slots)+len(sh.slots)/16+8)
			copy(grown, sh.slots)
			sh.slots = grown
		}
		sh.slots = append(sh.slots, slot{})
		i = int32(len(sh.slots) - 1)
		if int(i>>6) == len(sh.ref) {
			sh.ref = append(sh.ref, 0)
		}
	}
	// The key's bit starts clear: a key seen once goes before those seen
	// again.
	sh.ref[i>>6] &^= uint64(1) << (i & 63)
	sh.slots[i] = slot{key: key, idx: idx}
	sh.keys.insert(h, i, sh.hashAt)
	sh.set.held.Add(1)
	return &sh.slots[i]
}

// Allow decides whether hits for key fit at moment now and records them if
// they do. The key and hits must pass Replica.Check, which the Replica
// sees to; a key the table does not hold that is not valid UTF-8 is
// refused and not counted.
func (t *Table) Allow(key string, now, hits int64) window.Decision {
	var tk Ticket // a ticket, so that the decision is not tallied
	d, _, _ := t.try(key, now, hits, askNever, &tk)
	return d
}

// asking says what a decision does when a key's owner would have to be
// asked (owner allocation).
type asking uint8

const (
	// askNever decides from the node's view instead.
	askNever asking = iota
	// askOwner leaves the check undecided and says so.
	askOwner
	// askAgain is askOwner for a check whose demand is already counted.
	askAgain
	// askAnswered decides after the owner answered: a check still beyond
	// the grant is refused.
	askAnswered
	// askLate refuses a check still beyond the grant after the question
	// went unanswered in time.
	askLate
	// askLost decides from the view, within this node's share, after the
	// owner has long been silent.
	askLost
)

// try decides whether hits for key fit at moment now, as how says, and
// records them if they do, setting a non-nil tk to where; ask reports a
// check left undecided for the owner. A decision for a check that brings
// no ticket is counted in the shard's tally (Allow brings one of its own).
// The check must have passed Table.check; a key the table does not hold
// yet is refused with ErrKeyNotUTF8 if it is not valid UTF-8.
func (t *Table) try(key string, now, hits int64, how asking, tk *Ticket) (d window.Decision, ask bool, err error) {
	idx, elapsed := window.Position(now, t.rule.Window)
	live := t.live.Load()
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	// slotOf, written out: the check of a key the table holds, the one a
	// node makes most, makes one call fewer.
	s := sh.lookup(key, h)
	if s == nil {
		s = t.insert(sh, key, h, idx, now)
	}
	if s == nil {
		if !utf8.ValidString(key) {
			// A new key that is not UTF-8, which no slot may hold.
			sh.mu.Unlock()
			return d, false, keyNotUTF8(key)
		}
		// No room (the replica is full and every key it could evict is
		// in a shard another check holds, or the shard holds a billion
		// keys): decided as a key seen for the first time, and not
		// remembered.
		d = t.rule.DecideAt(window.Counts{}, elapsed, hits)
		if tk == nil {
			t.count(sh, d.Allowed)
		}
		sh.mu.Unlock()
		return d, false, nil
	}
	s.roll(idx, t.rule.Window, t.opening())
	owned := t.owns()
	if s.x == nil && live > 1 && !owned {
		s.x = t.newShared(s)
	}
	if owned && s.pos(idx) == 1 {
		d, ask = t.decideByOwner(s, elapsed, hits, how)
		if tk != nil && d.Allowed && hits > 0 && !ask {
			*tk = t.ticket(s, idx, hits, nil)
		}
		if tk == nil && !ask {
			t.count(sh, d.Allowed)
		}
	} else {
		d = t.decide(s, now, idx, elapsed, hits, live, tk)
		if tk == nil {
			t.count(sh, d.Allowed)
		}
	}
	sh.mu.Unlock()
	return d, ask, nil
}

// decideByOwner decides a check of an owner-allocated key in its current
// window and records it.
func (t *Table) decideByOwner(s *slot, elapsed time.Duration, hits int64, how asking) (d window.Decision, ask bool) {
	o := t.lease(s)
	if how == askNever || how == askOwner {
		o.addDemand(hits)
	}
	c := t.clockOf(s, elapsed)
	if o.owner == t.self {
		d = t.decideAsOwner(s, c, hits)
	} else {
		d, ask = t.decideOwned(s, c, hits)
		if ask {
			switch how {
			case askOwner, askAgain:
				return d, true
			case askAnswered:
				d = t.refuseAnswered(s, c, hits)
			case askLate:
				d = t.refuseLate(s, c, hits)
			default:
				d = t.admitAsked(s, c, hits)
			}
		}
	}
	if d.Allowed && hits > 0 {
		s.own[1] += hits
		s.ver[1] = stampOf(t.epoch.Load())
	}
	return d, false
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

// decide runs with the shard locked and the slot rolled to idx or beyond;
// a non-nil tk is set to where admitted hits were counted.
func (t *Table) decide(s *slot, now, idx int64, elapsed time.Duration, hits int64, live int32, tk *Ticket) window.Decision {
	own, view := s.counts(idx)
	p := s.pos(idx)
	if s.owned() != nil && p == 1 {
		// What an owner-allocated key learnt of the others still counts
		// on a node left alone, or after the rule moved to another policy.
		view = s.o.floor(s, view)
	}
	var d window.Decision
	var spent *allocState // the allocation that counts what it admits since its sync
	if live > 1 && s.x != nil && p >= 0 && !t.rule.IsStrict() {
		d = t.policy.decide(t, s, own, view, moment{now: now, idx: idx, elapsed: elapsed}, hits)
		spent = &s.x.alloc
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
			s.ver[p] = stampOf(t.epoch.Load())
			if tk != nil {
				*tk = t.ticket(s, idx, hits, spent)
			}
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
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(key, h)
	if s == nil {
		return own, view
	}
	s.roll(idx, t.rule.Window, t.opening())
	own, view = s.counts(idx)
	if o := s.owned(); o != nil && s.pos(idx) == 1 {
		view = o.floor(s, view)
		if t.owns() {
			return own, view
		}
	}
	if s.x != nil && t.live.Load() > 1 && s.pos(idx) == 1 {
		pub := t.policy.published(s)
		pub[1] += t.policy.unpublished(s)
		view.Prev += pub[0] - s.own[0]
		view.Curr += pub[1] - s.own[1]
	}
	return own, view
}

// Len returns the number of keys the table holds.
func (t *Table) Len() int { return int(t.keys.held.Load()) }

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
	sh, s, p := t.slotFor(e.Key, e.Window, now)
	if s == nil {
		return false
	}
	defer sh.mu.Unlock()
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

// ownedSlot is slotFor for an owner-allocated key: such a slot never rolls
// past this node's own window, whatever a peer's clock says, so that this
// node never decides its current window without the counts it has there.
// An entry for a later window gets a nil slot.
func (t *Table) ownedSlot(key string, win, now int64) (*shard, *slot, int) {
	if win > window.Index(now, t.rule.Window) {
		return nil, nil, -1
	}
	return t.slotFor(key, win, now)
}

// slotFor locks key's shard and returns the key's slot, rolled to window
// win or the current one, whichever is later, and win's position in it.
// For a window neither current nor beside it, or one the slot has rolled
// past, it returns a nil slot and holds no lock.
func (t *Table) slotFor(key string, win, now int64) (*shard, *slot, int) {
	idx := window.Index(now, t.rule.Window)
	if win > idx+1 || win < idx-1 {
		return nil, nil, -1
	}
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	s := t.slotOf(sh, key, h, max(idx, win), now)
	if s == nil {
		sh.mu.Unlock()
		return nil, nil, -1
	}
	s.roll(max(idx, win), t.rule.Window, t.opening())
	p := s.pos(win)
	if p < 0 {
		sh.mu.Unlock()
		return nil, nil, -1
	}
	return sh, s, p
}

// round is one pass over the table at a sync: it expires old keys, lets the
// allocation policy take its new budgets, and collects this incarnation's
// entries changed at or after epoch since.
func (t *Table) round(now int64, since, epoch uint64, collect bool) []stamped {
	idx := window.Index(now, t.rule.Window)
	live := t.live.Load()
	var out []stamped
	t.eachKept(idx, func(s *slot) {
		if live > 1 && s.x != nil {
			t.policy.sync(t, s, now, idx, epoch)
		}
		if collect {
			out = t.appendOwn(out, s, since)
		}
	})
	return out
}

// eachKept rolls every key to window idx, drops those with nothing left in
// it or the window before, and calls f on each of the rest with its shard
// locked. A shard left holding a quarter of its slots or fewer is shrunk.
func (t *Table) eachKept(idx int64, f func(s *slot)) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.slots {
			s := &sh.slots[j]
			if s.key == "" {
				continue
			}
			s.roll(idx, t.rule.Window, t.opening())
			if s.idx < idx-1 || s.empty() {
				sh.remove(int32(j), maphash.String(t.seed, s.key))
				continue
			}
			f(s)
		}
		sh.shrink()
		sh.mu.Unlock()
	}
}

// shrink moves the keys of a shard that holds a quarter of its slots or
// fewer into arrays their size, so that the room a flood of keys took is
// given back once they expire, not kept for the next; the caller holds
// sh.mu. Slots move, so no slot may be held across it. O(the shard's
// slots), and at most once for every three quarters of them freed.
func (sh *shard) shrink() {
	n := sh.keys.n
	if len(sh.slots) < shrinkFrom || n > len(sh.slots)/4 {
		return
	}
	old, oldRef := sh.slots, sh.ref
	sh.slots, sh.ref, sh.free, sh.keys, sh.hand = nil, nil, nil, keyIndex{}, 0
	if n == 0 {
		return
	}
	sh.slots = make([]slot, 0, n+n/16+8)
	sh.ref = make([]uint64, (n+63)/64)
	for j := range old {
		if old[j].key == "" {
			continue
		}
		i := int32(len(sh.slots))
		sh.slots = append(sh.slots, old[j])
		if oldRef[j>>6]&(1<<(j&63)) != 0 {
			sh.ref[i>>6] |= 1 << (i & 63)
		}
		sh.keys.insert(sh.hashAt(i), i, sh.hashAt)
	}
}

// shrinkFrom is the fewest slots a shard must have for shrink to bother.
const shrinkFrom = 64

// empty reports whether nothing is held for the slot's windows.
func (s *slot) empty() bool {
	if s.own != [2]int64{} || s.owned() != nil && !s.o.idle() {
		return false
	}
	return s.x == nil || s.x.demand == [2]int64{} && len(s.x.peers) == 0
}

// remove drops the slot at position i, whose key has hash h; the caller
// holds sh.mu.
func (sh *shard) remove(i int32, h uint64) {
	sh.keys.remove(h, i, sh.hashAt)
	sh.slots[i] = slot{}
	sh.free = append(sh.free, i)
	sh.set.held.Add(-1)
	if sh.lim != nil {
		sh.lim.held.Add(-1)
	}
}

// stamped is an own entry with the epoch it last changed in.
type stamped struct {
	Entry
	ver uint32
}

func (t *Table) appendOwn(out []stamped, s *slot, since uint64) []stamped {
	own := t.ownPublished(s)
	for p := range 2 {
		if !changedSince(s.ver[p], since) {
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
			s.roll(idx, t.rule.Window, t.opening())
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
				if o := s.owned(); o != nil && o.ext != nil {
					if b := o.ext.book; b != nil {
						for _, a := range b.accts {
							if a.adm[p] > 0 {
								out = append(out, Entry{Key: s.key, Window: w, Inc: a.inc, Admitted: a.adm[p]})
							}
						}
					}
					if x := o.ext; x.heldFrom != 0 && x.held[p] > 0 {
						out = append(out, Entry{Key: s.key, Window: w, Inc: x.heldFrom, Admitted: x.held[p]})
					}
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
