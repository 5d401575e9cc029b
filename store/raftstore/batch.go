package raftstore

import (
	"errors"

	badger "github.com/dgraph-io/badger/v4"
)

// splitTxn is a Badger write transaction that commits and starts afresh
// whenever the next write would make it too big (badger.ErrTxnTooBig).
// Writes are committed in the order they were made, so after a crash the
// database holds some prefix of them.
type splitTxn struct {
	db  *badger.DB
	txn *badger.Txn
}

// newSplitTxn starts a splitTxn on db.
func newSplitTxn(db *badger.DB) *splitTxn {
	return &splitTxn{db: db, txn: db.NewTransaction(true)}
}

// set stores key=val, committing the current transaction first if it is full.
// Badger keeps key and val until the commit, so the caller must not modify
// them before commit returns.
func (t *splitTxn) set(key, val []byte) error {
	return t.do(func(txn *badger.Txn) error { return txn.Set(key, val) })
}

// delete removes key, committing the current transaction first if it is
// full. Badger keeps key until the commit.
func (t *splitTxn) delete(key []byte) error {
	return t.do(func(txn *badger.Txn) error { return txn.Delete(key) })
}

// do runs one write, and if it does not fit, commits what is pending and runs
// it again in a new transaction. A write too big for an empty transaction
// fails with badger.ErrTxnTooBig.
func (t *splitTxn) do(write func(*badger.Txn) error) error {
	err := write(t.txn)
	if !errors.Is(err, badger.ErrTxnTooBig) {
		return err
	}
	if err := t.commit(); err != nil {
		return err
	}
	t.txn = t.db.NewTransaction(true)
	return write(t.txn)
}

// commit commits the pending writes. The splitTxn must not be used after.
func (t *splitTxn) commit() error {
	return t.txn.Commit()
}

// discard abandons uncommitted writes. It is safe to call after commit.
func (t *splitTxn) discard() {
	t.txn.Discard()
}
