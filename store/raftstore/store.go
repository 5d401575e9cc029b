package raftstore

import (
	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
)

// Store is a Raft log store and stable store over one store.Store: the log
// in its own keyspace of the database, the stable values in the store's
// (Set, Get, SetUint64 and GetUint64 are the store's own). It is safe for
// concurrent use. Closing it closes the underlying store.
type Store struct {
	*store.Store
}

// New returns a Raft log and stable store over s, which keeps owning the
// database: closing either closes both.
func New(s *store.Store) *Store { return &Store{Store: s} }

// Compile-time proof that Store is what Raft needs.
var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)
