package raftstore

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

// logKeyLen is the length of every log key: store.PrefixLog plus the
// entry's index as a big-endian uint64, so key order is index order.
const logKeyLen = 1 + 8

// logPrefix is the iteration prefix that covers every log entry key.
var logPrefix = []byte{store.PrefixLog}

// logKey returns the Badger key of the log entry at index.
func logKey(index uint64) []byte {
	return putLogKey(make([]byte, logKeyLen), index)
}

// putLogKey writes the key of the log entry at index into dst, which must be
// logKeyLen bytes long, and returns dst.
func putLogKey(dst []byte, index uint64) []byte {
	dst[0] = store.PrefixLog
	binary.BigEndian.PutUint64(dst[1:], index)
	return dst
}

// parseLogKey returns the index named by a log entry key.
func parseLogKey(key []byte) (uint64, error) {
	if len(key) != logKeyLen || key[0] != store.PrefixLog {
		return 0, fmt.Errorf("%w: malformed log key %x", store.ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[1:]), nil
}
