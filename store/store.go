package store

import (
	"errors"
	"fmt"
	"sync"

	badger "github.com/dgraph-io/badger/v4"
)

// Store is one Badger database: a stable keyspace of small named values
// (Set, Get), and room for the keyspaces of packages built on it (the Raft
// log of package raftstore), which reach the database through Do. It is
// safe for concurrent use. Close it to release the database.
type Store struct {
	db *badger.DB

	// mu guards closed. Every operation holds it for reading so that Close,
	// which holds it for writing, waits for operations in flight and later
	// operations fail with ErrClosed instead of reaching a closed database
	// (Badger panics when an iterator is opened on a closed database).
	mu     sync.RWMutex
	closed bool
}

var (
	// ErrKeyNotFound is returned by Get and GetUint64 when the key has never
	// been set. Its text is exactly "not found" because Raft recognises a
	// missing stable value by comparing the error's text, as it does for
	// raft-boltdb's error of the same name. It is returned unwrapped.
	ErrKeyNotFound = errors.New("not found")

	// ErrClosed is returned by every operation on a Store after Close.
	ErrClosed = errors.New("store: closed")

	// ErrCorrupt is wrapped by errors reporting stored data that cannot be
	// decoded: a uint64 value of the wrong size here, and in package
	// raftstore an unknown log encoding version, a truncated entry or a log
	// entry stored under the wrong index.
	ErrCorrupt = errors.New("corrupt data")
)

// Open opens the Badger database in dir, creating it if needed, and returns a
// Store over it. If dir is empty the database lives only in memory and
// vanishes on Close. Only one Store may have an on-disk directory open at a
// time; Badger locks the directory.
func Open(dir string, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		opt(&cfg)
	}

	var bopts badger.Options
	if dir == "" {
		bopts = badger.DefaultOptions("").WithInMemory(true)
	} else {
		bopts = badger.DefaultOptions(dir).WithSyncWrites(cfg.sync)
	}
	// The store never reads inside a write transaction, so conflict
	// detection would only cost memory and time.
	bopts = bopts.WithDetectConflicts(false)
	if cfg.logger != nil {
		bopts = bopts.WithLogger(slogLogger{l: cfg.logger})
	} else {
		bopts = bopts.WithLogger(nil)
	}
	if cfg.tune != nil {
		bopts = cfg.tune(bopts)
	}

	db, err := badger.Open(bopts)
	if err != nil {
		if dir == "" {
			return nil, fmt.Errorf("store: open in-memory badger: %w", err)
		}
		return nil, fmt.Errorf("store: open badger in %q: %w", dir, err)
	}
	return &Store{db: db}, nil
}

// Close closes the Badger database, flushing pending writes, and releases its
// files, memory and goroutines. It waits for operations in flight. Calling
// Close again returns nil; every other method returns ErrClosed afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close badger: %w", err)
	}
	return nil
}

// acquire takes the read side of s.mu for one operation. It returns
// ErrClosed, without holding the lock, if the store is closed; otherwise the
// caller must call s.mu.RUnlock when done.
func (s *Store) acquire() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Do runs fn with the Badger database, unless the store is closed: then it
// returns ErrClosed. Close waits for fn to return. It is for packages that
// keep a keyspace of their own in the database (package raftstore keeps the
// Raft log under PrefixLog); fn must touch no key outside it.
func (s *Store) Do(fn func(db *badger.DB) error) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	return fn(s.db)
}
