package counter

// fleet is the set of live nodes that keys of an owner-allocated rule are
// spread over, as one node sees it. Every node that sees the same members
// picks the same owner for a key.
type fleet struct {
	// gen changes whenever the members do, so that a key's cached owner is
	// worked out again.
	gen uint32
	ids []uint32 // registry ids
	// names are the members' node names hashed: a key's owner follows the
	// node's name, so a restarted node owns the keys it owned before.
	names []uint64
}

// ownerOf returns the registry id of key's owner among f's members by
// rendezvous hashing: the member whose name scores highest with the key.
// Adding or removing a member moves only the keys it wins or held.
func (f *fleet) ownerOf(key string) uint32 {
	owner, _ := f.rank(key)
	return owner
}

// rank returns key's owner and its standby, the member that scores second
// highest: the one that owns the key if the owner leaves, and so the one
// that keeps a copy of what only the owner knows. With one member both are
// that member.
func (f *fleet) rank(key string) (owner, standby uint32) {
	kh := hashString(key)
	owner, standby = f.ids[0], f.ids[0]
	var best, second uint64
	for i, nh := range f.names {
		score := mix64(kh ^ nh)
		switch {
		case i == 0:
			best = score
		case score > best:
			standby, second = owner, best
			owner, best = f.ids[i], score
		case i == 1 || score > second:
			standby, second = f.ids[i], score
		}
	}
	return owner, standby
}

// hashString is FNV-1a, the same on every node and every run.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is SplitMix64's finaliser: FNV alone scores similar keys alike.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
