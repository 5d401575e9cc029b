package counter

import (
	"fmt"
	"testing"
)

func testFleet(names ...string) *fleet {
	f := &fleet{gen: 1}
	for i, n := range names {
		f.ids = append(f.ids, uint32(i+1))
		f.names = append(f.names, hashString(n))
	}
	return f
}

// TestOwnerSpread checks that keys spread evenly over owners and that a
// member leaving moves only the keys it owned.
func TestOwnerSpread(t *testing.T) {
	for _, n := range []int{2, 3, 16, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("node-%d", i)
			}
			all, less := testFleet(names...), testFleet(names[1:]...)
			const keys = 20_000
			per := make(map[uint32]int)
			for k := range keys {
				key := fmt.Sprintf("user:%d", k)
				o := all.ownerOf(key)
				per[o]++
				// less numbers the same names one lower.
				if o2 := less.ownerOf(key) + 1; o != 1 && o2 != o {
					t.Fatalf("%s moved from member %d to %d when member 1 left", key, o, o2)
				}
			}
			mean := keys / n
			for id, c := range per {
				if c < mean/2 || c > mean*3/2 {
					t.Errorf("member %d owns %d of %d keys, mean %d", id, c, keys, mean)
				}
			}
			if len(per) != n {
				t.Errorf("%d of %d members own keys", len(per), n)
			}
		})
	}
}

// TestStandbyTakesOver checks that a key's standby is the member that owns
// it once its owner leaves, and never the owner itself.
func TestStandbyTakesOver(t *testing.T) {
	for _, n := range []int{2, 3, 16, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("node-%d", i)
			}
			all := testFleet(names...)
			for k := range 2_000 {
				key := fmt.Sprintf("user:%d", k)
				owner, standby := all.rank(key)
				if owner == standby {
					t.Fatalf("%s: member %d is both owner and standby", key, owner)
				}
				// The fleet without the owner, under the same ids.
				var rest fleet
				for i, id := range all.ids {
					if id != owner {
						rest.ids = append(rest.ids, id)
						rest.names = append(rest.names, all.names[i])
					}
				}
				if next := rest.ownerOf(key); next != standby {
					t.Fatalf("%s: standby %d, but member %d owns it once %d leaves", key, standby, next, owner)
				}
			}
		})
	}
}
