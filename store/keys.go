package store

import (
	"encoding/binary"
	"fmt"
)

// Key layout. Every key starts with a one-byte prefix naming its keyspace, so
// log entries and stable values can never collide. Neither prefix may be '!',
// which Badger reserves for its own keys.
const (
	// prefixLog starts the key of every log entry; the rest of the key is
	// the entry's index as a big-endian uint64, so key order is index order.
	prefixLog byte = 'l'
	// prefixStable starts the key of every stable-store value; the rest of
	// the key is the caller's key verbatim.
	prefixStable byte = 's'

	// logKeyLen is the length of every log key: prefix plus index.
	logKeyLen = 1 + 8
)

// logPrefix is the iteration prefix that covers every log entry key.
var logPrefix = []byte{prefixLog}

// logKey returns the Badger key of the log entry at index.
func logKey(index uint64) []byte {
	return putLogKey(make([]byte, logKeyLen), index)
}

// putLogKey writes the key of the log entry at index into dst, which must be
// logKeyLen bytes long, and returns dst.
func putLogKey(dst []byte, index uint64) []byte {
	dst[0] = prefixLog
	binary.BigEndian.PutUint64(dst[1:], index)
	return dst
}

// parseLogKey returns the index named by a log entry key.
func parseLogKey(key []byte) (uint64, error) {
	if len(key) != logKeyLen || key[0] != prefixLog {
		return 0, fmt.Errorf("%w: malformed log key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[1:]), nil
}

// stableKey returns the Badger key of the stable-store value named key.
func stableKey(key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = prefixStable
	copy(k[1:], key)
	return k
}
