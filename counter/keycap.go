package counter

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/window"
)

// A replica holds at most Config.MaxKeys keys, its rules' tables together,
// whoever brings them: a check, a peer's delta, a state pull. When it is
// full, a new key takes the place of one already held, chosen in O(1)
// amortised per new key and at no cost to a check on a key already held
// but one bit set in a word its shard owns:
//
//   - The key goes from the table that holds the most keys: a flood of new
//     keys on one rule evicts that rule's keys, not another's, and a rule
//     that holds few can still grow while the flood lasts.
//   - In that table it goes from the shard the new key hashes to, or the
//     next shard that holds any: each shard keeps about its share.
//   - In the shard, a clock hand (second chance) picks it: every lookup of
//     a key sets the key's bit, and the hand, passing the shard's slots in
//     turn, clears a set bit and moves on, and evicts the first key whose
//     bit is clear, or whose windows have both passed whatever its bit. A
//     new key's bit starts clear, so a flood of one-off keys evicts its own
//     kind first, and a key looked up at least once while the hand goes
//     round its shard stays.
//
// An evicted key is forgotten as if its windows had passed: checked again,
// it starts from no count of its own, from nothing it was told of its
// peers' counts, and, where this node owned it, from no account of what
// the others admitted. A key evicted while its window still runs may so be
// admitted more than its count in that window, which is why the bound is
// meant to be far above the keys a node holds in two windows of its
// traffic: it bounds a flood, not the keys a node serves.

// keyCap bounds the keys held by a replica's tables together.
type keyCap struct {
	max int64 // at least 1
	// held is how many keys the attached shards hold, and the new keys
	// being made: a key is counted before it is made, so that two shards
	// making keys at once cannot both take the last room.
	held atomic.Int64
	// sets are the key sets of the replica's tables, where eviction looks
	// for the largest.
	sets atomic.Pointer[[]*keySet]
}

func newKeyCap(max int) *keyCap {
	if max <= 0 {
		return nil
	}
	return &keyCap{max: int64(max)}
}

// keySet is a table's keys: its shards, shared with the tables that replace
// it for a rule whose window stays the same (Table.successor), and how many
// keys they hold.
type keySet struct {
	shards [shardCount]shard
	held   atomic.Int64
	// window is the length of the windows the set's keys are counted in:
	// the same for every table that shares the set.
	window time.Duration
}

// newKeySet returns an empty set for windows of length w, its shards
// hashing keys with seed and attached to c (nil: no bound).
func newKeySet(w time.Duration, seed maphash.Seed, c *keyCap) *keySet {
	ks := &keySet{window: w}
	for i := range ks.shards {
		sh := &ks.shards[i]
		sh.seed, sh.set, sh.lim = seed, ks, c
	}
	return ks
}

// setSets records the key sets of the replica's tables, and detaches those
// of dropped, whose keys no longer count against the bound. The caller
// holds the replica's lock.
func (c *keyCap) setSets(sets []*keySet, dropped []*keySet) {
	if c == nil {
		return
	}
	c.sets.Store(&sets)
	for _, ks := range dropped {
		for i := range ks.shards {
			sh := &ks.shards[i]
			sh.mu.Lock()
			if sh.lim == c {
				c.held.Add(-int64(sh.keys.n))
				sh.lim = nil
			}
			sh.mu.Unlock()
		}
	}
}

// makeRoom evicts one key to make room for a new one in sh, which is
// locked and belongs to own; at is the shard's index in its set, and now
// the moment. It reports false when no key could be evicted: every shard
// that holds one is locked by another goroutine, or none is held.
func (c *keyCap) makeRoom(own *keySet, sh *shard, at int, now int64) bool {
	victim := own
	if p := c.sets.Load(); p != nil {
		most := own.held.Load()
		for _, ks := range *p {
			if n := ks.held.Load(); n > most {
				victim, most = ks, n
			}
		}
	}
	if c.evictIn(victim, sh, at, now) {
		return true
	}
	return victim != own && c.evictIn(own, sh, at, now)
}

// evictIn evicts one key of ks, from its shard at or the first after it
// that holds one; locked is the shard the caller holds, whose lock is not
// taken again. Other shards are only tried: a shard another goroutine
// holds is passed by, so that two shards evicting from each other cannot
// deadlock.
func (c *keyCap) evictIn(ks *keySet, locked *shard, at int, now int64) bool {
	idx := window.Index(now, ks.window)
	for k := range shardCount {
		sh := &ks.shards[(at+k)%shardCount]
		if sh == locked {
			if sh.evict(idx) {
				return true
			}
			continue
		}
		if !sh.mu.TryLock() {
			continue
		}
		ok := sh.lim == c && sh.evict(idx)
		sh.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// evict removes the key the shard's clock hand comes to first whose bit
// is clear or whose windows, against window idx, have both passed, and
// reports whether the shard held one; the caller holds sh.mu. The hand
// clears the set bits it passes, so it goes round the slots at most twice.
func (sh *shard) evict(idx int64) bool {
	if sh.keys.n == 0 {
		return false
	}
	for {
		if int(sh.hand) >= len(sh.slots) {
			sh.hand = 0
		}
		i := sh.hand
		sh.hand++
		s := &sh.slots[i]
		if s.key == "" {
			continue
		}
		w, bit := &sh.ref[i>>6], uint64(1)<<(i&63)
		if *w&bit != 0 && s.idx >= idx-1 {
			*w &^= bit
			continue
		}
		sh.remove(i, sh.hashAt(i))
		sh.evicted++
		return true
	}
}

// Evicted returns how many keys the table has evicted to keep the
// replica within Config.MaxKeys, those of the tables it replaced for the
// same rule included.
func (t *Table) Evicted() uint64 {
	out := t.evictedBefore
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		out += sh.evicted
		sh.mu.Unlock()
	}
	return out
}
