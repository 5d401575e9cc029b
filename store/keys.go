package store

// Key layout. Every key starts with a one-byte prefix naming its keyspace, so
// keyspaces can never collide. No prefix may be '!', which Badger reserves
// for its own keys.
const (
	// PrefixLog starts the key of every Raft log entry, the keyspace of
	// package raftstore; the rest of the key is the entry's index as a
	// big-endian uint64, so key order is index order.
	PrefixLog byte = 'l'
	// prefixStable starts the key of every stable-store value; the rest of
	// the key is the caller's key verbatim.
	prefixStable byte = 's'
)

// stableKey returns the Badger key of the stable-store value named key.
func stableKey(key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = prefixStable
	copy(k[1:], key)
	return k
}
