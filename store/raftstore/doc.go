// Package raftstore keeps a Raft node's log and stable state in the Badger
// database of a [store.Store].
//
// A [Store] implements both [raft.LogStore] and [raft.StableStore] from
// github.com/hashicorp/raft, so one Badger database backs a node's log
// entries, its small pieces of durable Raft metadata (current term, last
// vote) and the node's own saved state. It is a drop-in replacement for
// raft-boltdb: lookups of missing log entries return exactly
// [raft.ErrLogNotFound], and lookups of missing stable keys return
// [store.ErrKeyNotFound], whose text is "not found" as raft expects.
//
// Log entries live under their own key prefix ([store.PrefixLog]) followed
// by the big-endian index, so Badger's key order is log order and
// FirstIndex, LastIndex and DeleteRange are seeks over keys only. Entries
// are stored in a compact, versioned binary encoding owned by this package
// rather than msgpack.
//
// The package is apart from store so that a program that keeps a node's
// counts on disk but runs no Raft log (no strict rules) links no Raft.
package raftstore
