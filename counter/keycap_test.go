package counter

import (
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/window"
)

// cappedReplica is a lone replica of rules that holds at most max keys.
func cappedReplica(t testing.TB, max int, rules ...window.Rule) *Replica {
	t.Helper()
	r, err := NewReplica(Config{Self: Incarnation{Node: "a", Boot: 1}, Rules: rules, Start: t0, MaxKeys: max})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// named is rule with another name.
func named(r window.Rule, name string) window.Rule {
	r.Name = name
	return r
}

// holds reports whether rule's table holds key, without marking it used
// as a lookup does.
func holds(r *Replica, rule, key string) bool {
	t := r.Table(rule)
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, ok := sh.keys.find(h, key, sh.slots)
	return ok
}

// keysHeld is how many keys the replica's tables hold, and have evicted.
func keysHeld(r *Replica) (held int, evicted uint64) {
	for _, t := range *r.tables.Load() {
		held += t.Len()
		evicted += t.Evicted()
	}
	return held, evicted
}

// peerDelta is a delta from node b of one admitted hit on each of keys,
// in window idx of rule.
func peerDelta(rule string, idx int64, keys ...string) *Delta {
	rd := RuleDelta{Rule: rule}
	for _, k := range keys {
		rd.Entries = append(rd.Entries, Entry{Key: k, Window: idx, Admitted: 1})
	}
	return &Delta{From: Incarnation{Node: "b", Boot: 1}, Seq: 1, Incarnations: []Incarnation{{Node: "b", Boot: 1}},
		Rules: []RuleDelta{rd}}
}

// ruleKeys are keys checked under a rule.
type ruleKeys struct {
	rule string
	keys []string
}

func TestMaxKeys(t *testing.T) {
	long := window.Rule{Name: "a", Count: 1, Window: time.Hour, Type: window.Fixed, SyncInterval: time.Second}
	keys := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = prefix + strconv.Itoa(i)
		}
		return out
	}
	tests := []struct {
		name     string
		max      int
		checks   []ruleKeys // keys checked, rule by rule
		peer     []string   // keys of rule a a peer's delta brings, after the checks
		wantHeld map[string]int
		evicted  map[string]uint64
	}{
		{name: "no bound", max: 0, checks: []ruleKeys{{"a", keys("k", 3000)}},
			wantHeld: map[string]int{"a": 3000}, evicted: map[string]uint64{"a": 0}},
		{name: "negative: no bound", max: -1, checks: []ruleKeys{{"a", keys("k", 3000)}},
			wantHeld: map[string]int{"a": 3000}, evicted: map[string]uint64{"a": 0}},
		{name: "under the bound", max: 1000, checks: []ruleKeys{{"a", keys("k", 999)}},
			wantHeld: map[string]int{"a": 999}, evicted: map[string]uint64{"a": 0}},
		{name: "at the bound", max: 1000, checks: []ruleKeys{{"a", keys("k", 1000)}},
			wantHeld: map[string]int{"a": 1000}, evicted: map[string]uint64{"a": 0}},
		{name: "past the bound", max: 1000, checks: []ruleKeys{{"a", keys("k", 2500)}},
			wantHeld: map[string]int{"a": 1000}, evicted: map[string]uint64{"a": 1500}},
		{name: "a bound below the shards", max: 10, checks: []ruleKeys{{"a", keys("k", 100)}},
			wantHeld: map[string]int{"a": 10}, evicted: map[string]uint64{"a": 90}},
		{name: "the same keys again", max: 1000, checks: []ruleKeys{{"a", append(keys("k", 1000), keys("k", 1000)...)}},
			wantHeld: map[string]int{"a": 1000}, evicted: map[string]uint64{"a": 0}},
		{name: "a peer's keys count", max: 1000, checks: []ruleKeys{{"a", keys("k", 500)}}, peer: keys("p", 800),
			wantHeld: map[string]int{"a": 1000}, evicted: map[string]uint64{"a": 300}},
		{name: "a flood on one rule evicts its own keys", max: 1000,
			checks:   []ruleKeys{{"a", keys("k", 300)}, {"b", keys("f", 5000)}},
			wantHeld: map[string]int{"a": 300, "b": 700}, evicted: map[string]uint64{"a": 0, "b": 4300}},
		{name: "a rule that holds few grows into a flooded one's keys", max: 1000,
			checks:   []ruleKeys{{"b", keys("f", 5000)}, {"a", keys("k", 300)}},
			wantHeld: map[string]int{"a": 300, "b": 700}, evicted: map[string]uint64{"a": 0, "b": 4300}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cappedReplica(t, tt.max, long, named(long, "b"))
			for _, c := range tt.checks {
				for _, k := range c.keys {
					if _, _, err := r.Decide(t0, c.rule, k, 1, 0, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tt.peer != nil {
				res, err := r.Receive(t0, peerDelta("a", window.Index(t0, time.Hour), tt.peer...))
				if err != nil || res.Merged != len(tt.peer) {
					t.Fatalf("Receive() = %+v, %v; want %d merged", res, err, len(tt.peer))
				}
			}
			for rule, want := range tt.wantHeld {
				tb := r.Table(rule)
				if got := tb.Len(); got != want {
					t.Errorf("rule %s holds %d keys, want %d", rule, got, want)
				}
				if got := tb.Evicted(); got != tt.evicted[rule] {
					t.Errorf("rule %s evicted %d keys, want %d", rule, got, tt.evicted[rule])
				}
			}
			if held, _ := keysHeld(r); tt.max > 0 && held > tt.max {
				t.Errorf("the replica holds %d keys, over its bound of %d", held, tt.max)
			}
		})
	}
}

// TestMaxKeysEvictsByAge: keys nothing looks up again go in the order
// they came, each shard's oldest first.
func TestMaxKeysEvictsByAge(t *testing.T) {
	const max = 10_000
	r := cappedReplica(t, max, rule(1, time.Hour, window.Fixed))
	for i := range 3 * max {
		if _, _, err := r.Decide(t0, "api", "k"+strconv.Itoa(i), 1, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range max {
		if k := "k" + strconv.Itoa(i); holds(r, "api", k) {
			t.Fatalf("key %s, of the first %d, is still held after %d newer keys", k, max, 2*max)
		}
	}
	for i := 3*max - max/4; i < 3*max; i++ {
		if k := "k" + strconv.Itoa(i); !holds(r, "api", k) {
			t.Fatalf("key %s, of the last %d, was evicted", k, max/4)
		}
	}
}

// TestMaxKeysKeepsAKeyInUse: a key checked while a flood of one-off keys
// passes the bound many times over keeps its count: it is refused
// throughout, while every one-off key is admitted.
func TestMaxKeysKeepsAKeyInUse(t *testing.T) {
	tests := []struct {
		name  string
		every int // one-off keys between two checks of the key in use
		typ   window.Type
	}{
		{"checked every 10 new keys, fixed", 10, window.Fixed},
		{"checked every 50 new keys, sliding", 50, window.Sliding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const max, flood = 10_000, 100_000
			r := cappedReplica(t, max, rule(5, time.Hour, tt.typ))
			for range 5 {
				if d, _, _ := r.Decide(t0, "api", "in-use", 1, 0, nil); !d.Allowed {
					t.Fatal("a hit within the count was refused")
				}
			}
			for i := range flood {
				if d, _, _ := r.Decide(t0, "api", "one-off:"+strconv.Itoa(i), 1, 0, nil); !d.Allowed {
					t.Fatalf("one-off key %d refused", i)
				}
				if i%tt.every == 0 {
					if d, _, _ := r.Decide(t0, "api", "in-use", 1, 0, nil); d.Allowed {
						t.Fatalf("the key in use was admitted a 6th hit of 5 after %d one-off keys: it was evicted", i+1)
					}
				}
			}
			held, evicted := keysHeld(r)
			if held != max || evicted != flood+1-max {
				t.Fatalf("held %d keys and evicted %d, want %d and %d", held, evicted, max, flood+1-max)
			}
		})
	}
}

// TestMaxKeysEvictedKey: a key evicted while its window runs starts again
// from nothing, as a new key does: its count is admitted again.
func TestMaxKeysEvictedKey(t *testing.T) {
	r := cappedReplica(t, 100, rule(3, time.Hour, window.Sliding))
	for range 3 {
		r.Decide(t0, "api", "k", 1, 0, nil)
	}
	if d, _, _ := r.Decide(t0, "api", "k", 1, 0, nil); d.Allowed {
		t.Fatal("a 4th hit of 3 was admitted")
	}
	for i := 0; holds(r, "api", "k"); i++ {
		if i > 10_000 {
			t.Fatal("k never evicted")
		}
		r.Decide(t0, "api", "f"+strconv.Itoa(i), 1, 0, nil)
	}
	if own, view := r.Table("api").Counts("k", t0); own != (window.Counts{}) || view != (window.Counts{}) {
		t.Fatalf("an evicted key counts %v (view %v), want nothing", own, view)
	}
	for i := range 3 {
		if d, _, _ := r.Decide(t0, "api", "k", 1, 0, nil); !d.Allowed || d.Remaining != int64(2-i) {
			t.Fatalf("hit %d on the evicted key: %+v, want admitted with %d remaining", i+1, d, 2-i)
		}
	}
	if d, _, _ := r.Decide(t0, "api", "k", 1, 0, nil); d.Allowed {
		t.Fatal("a 4th hit of 3 after eviction was admitted")
	}
}

// TestMaxKeysPassedWindowsFirst: a key whose windows have both passed is
// evicted before a key of the current window, whatever its bit.
func TestMaxKeysPassedWindowsFirst(t *testing.T) {
	// About 40 keys of each kind a shard, so that no shard gets as many
	// new ones.
	const n = 64 * 40
	r := cappedReplica(t, 2*n, rule(10, time.Minute, window.Fixed))
	for i := range n {
		k := "stale" + strconv.Itoa(i)
		r.Decide(t0, "api", k, 1, 0, nil)
		r.Decide(t0, "api", k, 1, 0, nil) // looked up again: its bit is set
	}
	// Two windows on, before any sweep: the stale keys' windows have
	// passed. Keys of the new window fill the replica, with their bits
	// clear, and then each new key takes the place of a stale one.
	later := t0 + 2*int64(time.Minute)
	for i := range n {
		r.Decide(later, "api", "current"+strconv.Itoa(i), 1, 0, nil)
	}
	for i := range 64 {
		r.Decide(later, "api", "new"+strconv.Itoa(i), 1, 0, nil)
	}
	for _, k := range []string{"current", "new"} {
		for i := range 64 {
			if k := k + strconv.Itoa(i); !holds(r, "api", k) {
				t.Fatalf("key %s evicted before the stale keys", k)
			}
		}
	}
	if held, evicted := keysHeld(r); held != 2*n || evicted != 64 {
		t.Fatalf("held %d and evicted %d, want %d and 64", held, evicted, 2*n)
	}
}

// TestMaxKeysDroppedRule: a rule removed by SetRules gives its room back,
// and a rule whose window changed carries its evictions over.
func TestMaxKeysDroppedRule(t *testing.T) {
	a := window.Rule{Name: "a", Count: 1, Window: time.Hour, Type: window.Fixed, SyncInterval: time.Second}
	r := cappedReplica(t, 100, a)
	for i := range 150 {
		r.Decide(t0, "a", "k"+strconv.Itoa(i), 1, 0, nil)
	}
	changed := a
	changed.Window = 2 * time.Hour
	if err := r.SetRules([]window.Rule{changed, named(a, "b")}, t0); err != nil {
		t.Fatal(err)
	}
	if got := r.Table("a").Evicted(); got != 50 {
		t.Fatalf("rule a, its window changed, says %d evicted, want the 50 before", got)
	}
	for i := range 100 {
		r.Decide(t0, "b", "k"+strconv.Itoa(i), 1, 0, nil)
	}
	if got := r.Table("b").Evicted(); got != 0 {
		t.Fatalf("rule b evicted %d keys: the replaced table's keys still count", got)
	}
}

// TestMaxKeysProperty: whatever checks, peers' deltas and rule changes
// come, within one window, the replica never holds more keys than its
// bound, and every key made is held or counted as evicted: with a count
// of 1 a check is admitted exactly when its key was not held.
func TestMaxKeysProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.IntRange(1, 300).Draw(t, "max")
		base := window.Rule{Name: "a", Count: 1, Window: time.Hour, Type: window.Fixed, SyncInterval: time.Second}
		r, err := NewReplica(Config{Self: Incarnation{Node: "a", Boot: 1}, Rules: []window.Rule{base, named(base, "b")},
			Start: t0, MaxKeys: max})
		if err != nil {
			t.Fatal(err)
		}
		idx := window.Index(t0, time.Hour)
		made := 0 // keys made: admitted checks, and entries merged
		peerKeys := 0
		steps := rapid.IntRange(1, 400).Draw(t, "steps")
		for range steps {
			rule := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "rule")
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				n := rapid.IntRange(1, 50).Draw(t, "peer keys")
				ks := make([]string, n)
				for i := range ks {
					ks[i] = "peer:" + strconv.Itoa(peerKeys)
					peerKeys++
				}
				res, err := r.Receive(t0, peerDelta(rule, idx, ks...))
				if err != nil {
					t.Fatal(err)
				}
				made += res.Merged
			default:
				// Keys from a small pool, so that some are checked again.
				k := "k" + strconv.Itoa(rapid.IntRange(0, 2*max).Draw(t, "key"))
				d, _, err := r.Decide(t0, rule, k, 1, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					made++
				}
			}
			held, evicted := keysHeld(r)
			if held > max {
				t.Fatalf("held %d keys, over the bound of %d", held, max)
			}
			if held+int(evicted) != made {
				t.Fatalf("held %d and evicted %d, but %d keys were made", held, evicted, made)
			}
		}
	})
}

// TestMaxKeysConcurrent: checks on several rules at once, from several
// goroutines, while rules come and go, keep within the bound, and the
// bound's count of keys stays that of the tables' keys.
func TestMaxKeysConcurrent(t *testing.T) {
	const max = 500
	base := window.Rule{Name: "a", Count: 1, Window: time.Hour, Type: window.Fixed, SyncInterval: time.Second}
	rules := []window.Rule{base, named(base, "b")}
	r := cappedReplica(t, max, rules...)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 5000 {
				rule := []string{"a", "b", "c"}[(g+i)%3]
				r.Decide(t0, rule, "g"+strconv.Itoa(g)+":"+strconv.Itoa(i), 1, 0, nil) // c fails while removed
			}
		}()
	}
	go func() {
		defer func() { done <- struct{}{} }()
		for i := range 50 {
			next := rules
			if i%2 == 0 {
				next = append(next[:2:2], named(base, "c"))
			}
			if err := r.SetRules(next, t0); err != nil {
				t.Error(err)
			}
		}
	}()
	for range 5 {
		<-done
	}
	held, _ := keysHeld(r)
	if held > max {
		t.Fatalf("held %d keys, over the bound of %d", held, max)
	}
	if got := r.keyCap.held.Load(); got != int64(held) {
		t.Fatalf("the bound counts %d keys, the tables hold %d", got, held)
	}
}

// slotsOf is how many slots the table of rule has, in use or not, and how
// many keys its shards index.
func slotsOf(r *Replica, rule string) (slots, indexed int) {
	t := r.Table(rule)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		slots += len(sh.slots)
		indexed += sh.keys.n
		sh.mu.Unlock()
	}
	return slots, indexed
}

// TestShrinkAfterExpiry: once the keys of a flood expire, the sweep gives
// their room back, and the keys still in use keep their counts.
func TestShrinkAfterExpiry(t *testing.T) {
	const w = time.Minute
	tests := []struct {
		name      string
		flood     int // keys checked once, in the first window
		kept      int // keys checked in the first window and the next
		wantSlots int // once the flood has expired
	}{
		{"all expired", 20_000, 0, 0},
		{"a tenth kept", 18_000, 2_000, 2_000},
		{"most kept: no shrink", 5_000, 15_000, 20_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestReplica(t, "a", rule(10, w, window.Fixed))
			for i := range tt.flood {
				r.Decide(t0, "api", "flood"+strconv.Itoa(i), 1, 0, nil)
			}
			for i := range tt.kept {
				r.Decide(t0, "api", "kept"+strconv.Itoa(i), 1, 0, nil)
				r.Decide(t0+int64(w), "api", "kept"+strconv.Itoa(i), 1, 0, nil)
			}
			// Alone, the replica sweeps once a window.
			later := t0 + 2*int64(w)
			r.Tick(later)
			slots, indexed := slotsOf(r, "api")
			if tb := r.Table("api"); tb.Len() != tt.kept || indexed != tt.kept {
				t.Fatalf("holds %d keys (%d indexed), want %d", tb.Len(), indexed, tt.kept)
			}
			if slots != tt.wantSlots {
				t.Fatalf("%d slots for %d keys, want %d", slots, tt.kept, tt.wantSlots)
			}
			for i := range tt.kept {
				k := "kept" + strconv.Itoa(i)
				if own, _ := r.Table("api").Counts(k, later); own != (window.Counts{Prev: 1}) {
					t.Fatalf("key %s counts %+v after the sweep, want its hit of the last window", k, own)
				}
			}
			// The shrunk shards take keys again, and find them.
			for i := range 1000 {
				r.Decide(later, "api", "new"+strconv.Itoa(i), 1, 0, nil)
			}
			if got := r.Table("api").Len(); got != tt.kept+1000 {
				t.Fatalf("holds %d keys after 1000 more, want %d", got, tt.kept+1000)
			}
		})
	}
}
