// Package store keeps a Raft node's log and stable state in BadgerDB.
//
// A [Store] implements both [raft.LogStore] and [raft.StableStore] from
// github.com/hashicorp/raft, so one Badger database can back a node's log
// entries and its small pieces of durable metadata (current term, last vote).
// It is a drop-in replacement for raft-boltdb: lookups of missing log entries
// return exactly [raft.ErrLogNotFound], and lookups of missing stable keys
// return [ErrKeyNotFound], whose text is "not found" as raft expects.
//
// Open with an empty directory keeps everything in memory, which suits tests
// and throwaway nodes. Open with a directory stores data on disk; writes are
// synced to disk before they return unless the option WithSync(false) is
// given.
//
// Log entries live under their own key prefix followed by the big-endian
// index, so Badger's key order is log order and FirstIndex, LastIndex and
// DeleteRange are seeks over keys only. Entries are stored in a compact,
// versioned binary encoding owned by this package rather than msgpack.
package store
