// Package store keeps a node's durable state in BadgerDB.
//
// A [Store] is one Badger database. Its stable keyspace holds small named
// values (Set, Get, and SetUint64 and GetUint64 in the representation
// raft-boltdb uses): a node's saved counts, and the Raft metadata of strict
// mode. Lookups of missing keys return [ErrKeyNotFound], whose text is "not
// found" as Raft expects. Package store/raftstore keeps the Raft log in a
// keyspace of its own in the same database and adapts a Store to Raft's log
// and stable store interfaces; this package imports no Raft, so a node that
// runs no strict rules links none.
//
// Open with an empty directory keeps everything in memory, which suits tests
// and throwaway nodes. Open with a directory stores data on disk; writes are
// synced to disk before they return unless the option WithSync(false) is
// given.
package store
