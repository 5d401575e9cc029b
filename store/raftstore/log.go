package raftstore

import (
	"errors"
	"fmt"
	"math"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
)

// FirstIndex returns the index of the oldest log entry, or 0 if the log is
// empty. It implements raft.LogStore.
func (s *Store) FirstIndex() (uint64, error) {
	var idx uint64
	err := s.Do(func(db *badger.DB) error {
		var err error
		if idx, err = edgeIndex(db, false); err != nil {
			return fmt.Errorf("store: first index: %w", err)
		}
		return nil
	})
	return idx, err
}

// LastIndex returns the index of the newest log entry, or 0 if the log is
// empty. It implements raft.LogStore.
func (s *Store) LastIndex() (uint64, error) {
	var idx uint64
	err := s.Do(func(db *badger.DB) error {
		var err error
		if idx, err = edgeIndex(db, true); err != nil {
			return fmt.Errorf("store: last index: %w", err)
		}
		return nil
	})
	return idx, err
}

// edgeIndex returns the lowest (last false) or highest (last true) log index
// present, or 0 if there is none, reading keys only.
func edgeIndex(db *badger.DB, last bool) (uint64, error) {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: logPrefix, Reverse: last})
	defer it.Close()
	if last {
		it.Seek(logKey(math.MaxUint64))
	} else {
		it.Seek(logKey(0))
	}
	if !it.Valid() {
		return 0, nil
	}
	return parseLogKey(it.Item().Key())
}

// GetLog reads the log entry at index into log, replacing all its fields. It
// returns exactly raft.ErrLogNotFound, unwrapped, if there is no entry at
// index. It implements raft.LogStore.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	return s.Do(func(db *badger.DB) error { return getLog(db, index, log) })
}

// getLog does the work of GetLog.
func getLog(db *badger.DB, index uint64, log *raft.Log) error {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	item, err := txn.Get(logKey(index))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("store: get log %d: %w", index, err)
	}
	// The copy is owned by the decoded entry: Data and Extensions alias it.
	val, err := item.ValueCopy(nil)
	if err != nil {
		return fmt.Errorf("store: get log %d: read value: %w", index, err)
	}
	var l raft.Log
	if err := decodeLog(val, &l); err != nil {
		return fmt.Errorf("store: get log %d: %w", index, err)
	}
	if l.Index != index {
		return fmt.Errorf("store: get log %d: %w: entry holds index %d", index, store.ErrCorrupt, l.Index)
	}
	*log = l
	return nil
}

// StoreLog stores one log entry, replacing any entry at the same index. It
// implements raft.LogStore.
func (s *Store) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores log entries, replacing any entries at the same indexes.
// The entries are written in one Badger transaction when they fit; a batch
// too large for one transaction is split into several, committed in slice
// order, so a crash part-way leaves a prefix of the batch stored. Raft passes
// entries in index order, so the stored log stays contiguous. It implements
// raft.LogStore.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	return s.Do(func(db *badger.DB) error { return storeLogs(db, logs) })
}

// storeLogs does the work of StoreLogs.
func storeLogs(db *badger.DB, logs []*raft.Log) error {
	// Encode every key and value into two allocations. Badger holds on to
	// them until the transaction commits.
	size := 0
	for i, l := range logs {
		if l == nil {
			return fmt.Errorf("store: store logs: entry %d of %d is nil", i, len(logs))
		}
		size += encodedLogLen(l)
	}
	keys := make([]byte, logKeyLen*len(logs))
	vals := make([]byte, 0, size)

	txn := newSplitTxn(db)
	defer txn.discard()
	for i, l := range logs {
		start := len(vals)
		var err error
		if vals, err = appendLog(vals, l); err != nil {
			return fmt.Errorf("store: store log %d: %w", l.Index, err)
		}
		key := putLogKey(keys[i*logKeyLen:(i+1)*logKeyLen:(i+1)*logKeyLen], l.Index)
		if err := txn.set(key, vals[start:len(vals):len(vals)]); err != nil {
			return fmt.Errorf("store: store log %d: %w", l.Index, err)
		}
	}
	if err := txn.commit(); err != nil {
		if len(logs) == 1 {
			return fmt.Errorf("store: store log %d: commit: %w", logs[0].Index, err)
		}
		return fmt.Errorf("store: store logs %d..%d: commit: %w", logs[0].Index, logs[len(logs)-1].Index, err)
	}
	return nil
}

// DeleteRange deletes the log entries with indexes from min to max inclusive;
// indexes with no entry are skipped. Raft uses it both to drop a prefix after
// a snapshot and to drop a conflicting suffix. Only keys are read.
//
// A range that fits one Badger transaction is deleted atomically. A larger
// range is deleted in several transactions, ordered so that a crash part-way
// never leaves a hole inside the log: from the low end when entries remain
// above max (prefix truncation), otherwise from the high end (suffix
// truncation). It implements raft.LogStore.
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	return s.Do(func(db *badger.DB) error {
		if err := deleteRange(db, min, max); err != nil {
			return fmt.Errorf("store: delete logs %d..%d: %w", min, max, err)
		}
		return nil
	})
}

// deleteRange does the work of DeleteRange.
func deleteRange(db *badger.DB, min, max uint64) error {
	last, err := edgeIndex(db, true)
	if err != nil {
		return err
	}
	ascending := last > max

	// Iterate a read snapshot; the deletes go through a separate write
	// transaction so the iterator never sees its own writes.
	view := db.NewTransaction(false)
	defer view.Discard()
	it := view.NewIterator(badger.IteratorOptions{Prefix: logPrefix, Reverse: !ascending})
	defer it.Close()

	txn := newSplitTxn(db)
	defer txn.discard()
	if ascending {
		it.Seek(logKey(min))
	} else {
		it.Seek(logKey(max))
	}
	for ; it.Valid(); it.Next() {
		item := it.Item()
		idx, err := parseLogKey(item.Key())
		if err != nil {
			return err
		}
		if idx < min || idx > max {
			break
		}
		// The iterator reuses its key buffer; Badger keeps deleted keys
		// until commit.
		if err := txn.delete(item.KeyCopy(nil)); err != nil {
			return fmt.Errorf("delete log %d: %w", idx, err)
		}
	}
	if err := txn.commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
