package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// Set stores val under key in the stable store, replacing any previous value.
// It implements raft.StableStore.
func (s *Store) Set(key, val []byte) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()

	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set(stableKey(key), val); err != nil {
		return fmt.Errorf("store: set %q: %w", key, err)
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: set %q: commit: %w", key, err)
	}
	return nil
}

// Get returns a copy of the value stored under key in the stable store. If
// key was never set it returns a nil value and ErrKeyNotFound, unwrapped, whose
// text "not found" is what Raft checks for. As with raft-boltdb, a key set to
// an empty value reads back as a nil value with a nil error. It implements
// raft.StableStore.
func (s *Store) Get(key []byte) ([]byte, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()

	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	item, err := txn.Get(stableKey(key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: get %q: %w", key, err)
	}
	val, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("store: get %q: read value: %w", key, err)
	}
	if len(val) == 0 {
		return nil, nil // raft-boltdb's copy of an empty value is nil
	}
	return val, nil
}

// SetUint64 stores val under key in the stable store as 8 big-endian bytes,
// the same representation raft-boltdb uses. It implements raft.StableStore.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value stored under key by SetUint64. If key was never
// set it returns 0 and ErrKeyNotFound, unwrapped, as Raft expects. A value
// that is not exactly 8 bytes (one written by Set) is reported as an error
// wrapping ErrCorrupt. It implements raft.StableStore.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	val, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(val) != 8 {
		return 0, fmt.Errorf("store: get uint64 %q: %w: value is %d bytes, want 8", key, ErrCorrupt, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}
