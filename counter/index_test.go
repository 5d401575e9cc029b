package counter

import (
	"fmt"
	"hash/maphash"
	"testing"

	"pgregory.net/rapid"
)

// TestKeyIndexMatchesAMap checks the index against a map over random
// inserts, removals and lookups, with hashes that often collide.
func TestKeyIndexMatchesAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := maphash.MakeSeed()
		// Few distinct top bits make long probe runs and wrap-arounds.
		collide := rapid.Bool().Draw(t, "collide")
		hash := func(k string) uint64 {
			h := maphash.String(seed, k)
			if collide {
				h &= 0x3_0000_ffff_ffff
			}
			return h
		}
		var ix keyIndex
		var slots []slot
		hashAt := func(i int32) uint64 { return hash(slots[i].key) }
		var free []int32
		want := map[string]int32{}
		for range rapid.IntRange(1, 400).Draw(t, "ops") {
			k := fmt.Sprint("k", rapid.IntRange(0, 60).Draw(t, "key"))
			h := hash(k)
			got, found := ix.find(h, k, slots)
			i, ok := want[k]
			if found != ok || found && got != i {
				t.Fatalf("find(%q) = %d, %v; want %d, %v", k, got, found, i, ok)
			}
			switch {
			case !ok:
				var at int32
				if n := len(free); n > 0 {
					at, free = free[n-1], free[:n-1]
				} else {
					slots = append(slots, slot{})
					at = int32(len(slots) - 1)
				}
				slots[at] = slot{key: k}
				ix.insert(h, at, hashAt)
				want[k] = at
			case rapid.Bool().Draw(t, "remove"):
				ix.remove(h, i, hashAt)
				slots[i] = slot{}
				free = append(free, i)
				delete(want, k)
			}
			if ix.n != len(want) {
				t.Fatalf("index holds %d keys, want %d", ix.n, len(want))
			}
		}
		for k, i := range want {
			if got, ok := ix.find(hash(k), k, slots); !ok || got != i {
				t.Fatalf("at the end find(%q) = %d, %v; want %d", k, got, ok, i)
			}
		}
	})
}
