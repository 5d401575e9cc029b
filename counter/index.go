package counter

// keyIndex finds a shard's slots by key. It is an open-addressing table with
// linear probing over 32-bit cells: a slot's position plus one in the low 24
// bits (0: empty) and 8 bits of the key's hash, which let most probes that
// miss skip reading a key. Against a map[string]int32 it saves the copy of
// each key's string header and most of the map's overhead: about 6 bytes a
// key instead of 40, a sixth of what a key costs a node. Deletion shifts
// the cells that follow back, so no tombstones build up. A shard holds at
// most maxShardSlots keys.
type keyIndex struct {
	cells []uint32
	n     int // keys held
}

// maxShardSlots is the most slots one shard indexes: 2^24 − 1, a billion
// keys a rule over its 64 shards.
const maxShardSlots = 1<<24 - 1

// cell packs a slot position with a tag from its key's hash.
func cell(h uint64, i int32) uint32 { return uint32(h>>56)<<24 | uint32(i+1) }

// home is where a key with hash h starts probing in a table of size
// mask+1.
func home(h uint64, mask int) int { return int(h>>24) & mask }

// find returns the position of the slot holding key, whose hash is h.
func (ix *keyIndex) find(h uint64, key string, slots []slot) (int32, bool) {
	if ix.n == 0 {
		return 0, false
	}
	mask := len(ix.cells) - 1
	tag := uint32(h>>56) << 24
	for j := home(h, mask); ; j = (j + 1) & mask {
		c := ix.cells[j]
		if c == 0 {
			return 0, false
		}
		if c&0xff000000 == tag {
			if i := int32(c&0xffffff) - 1; slots[i].key == key {
				return i, true
			}
		}
	}
}

// insert records that the slot at position i (below maxShardSlots) holds a
// key with hash h, which the index does not hold yet. hash gives the hash
// of the key at a position, to place every key again when the table grows.
func (ix *keyIndex) insert(h uint64, i int32, hash func(int32) uint64) {
	if 4*(ix.n+1) > 3*len(ix.cells) {
		ix.grow(hash)
	}
	ix.place(h, cell(h, i))
	ix.n++
}

func (ix *keyIndex) place(h uint64, c uint32) {
	mask := len(ix.cells) - 1
	j := home(h, mask)
	for ix.cells[j] != 0 {
		j = (j + 1) & mask
	}
	ix.cells[j] = c
}

// remove forgets the slot at position i, whose key has hash h. hash is as
// for insert.
func (ix *keyIndex) remove(h uint64, i int32, hash func(int32) uint64) {
	mask := len(ix.cells) - 1
	want := cell(h, i)
	j := home(h, mask)
	for ix.cells[j] != want {
		if ix.cells[j] == 0 {
			return // not held
		}
		j = (j + 1) & mask
	}
	// Shift back every cell after j whose probe passed j, so that a
	// search from its home still finds it without crossing an empty cell.
	for k := (j + 1) & mask; ix.cells[k] != 0; k = (k + 1) & mask {
		at := home(hash(int32(ix.cells[k]&0xffffff)-1), mask)
		if (k-at)&mask >= (k-j)&mask {
			ix.cells[j] = ix.cells[k]
			j = k
		}
	}
	ix.cells[j] = 0
	ix.n--
}

// grow doubles the table (from 8 cells).
func (ix *keyIndex) grow(hash func(int32) uint64) {
	old := ix.cells
	ix.cells = make([]uint32, max(8, 2*len(old)))
	for _, c := range old {
		if c != 0 {
			ix.place(hash(int32(c&0xffffff)-1), c)
		}
	}
}
