package raftstore_test

import (
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/raftstore"
)

// backend names a way of opening a Store for tests and benchmarks.
type backend struct {
	name string
	// disk reports whether the store lives in a directory that survives Close.
	disk bool
	opts []store.Option
}

// backends are the configurations every conformance test runs against.
var backends = []backend{
	{name: "memory"},
	{name: "disk", disk: true},
}

// open opens a fresh store for b, closed when the test ends.
func (b backend) open(tb testing.TB, opts ...store.Option) *raftstore.Store {
	tb.Helper()
	dir := ""
	if b.disk {
		dir = tb.TempDir()
	}
	s, err := openStore(dir, append(append([]store.Option(nil), b.opts...), opts...)...)
	if err != nil {
		tb.Fatalf("Open(%q): %v", dir, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// openStore opens a store.Store in dir and returns the Raft store over it.
func openStore(dir string, opts ...store.Option) (*raftstore.Store, error) {
	s, err := store.Open(dir, opts...)
	if err != nil {
		return nil, err
	}
	return raftstore.New(s), nil
}

// forEachBackend runs fn as a subtest for every backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// smallTxns shrinks Badger's memtable so a transaction holds only about 1,600
// writes, making it cheap to exercise the ErrTxnTooBig splitting paths.
var smallTxns = store.WithBadgerOptions(func(o badger.Options) badger.Options {
	return o.WithMemTableSize(1 << 20).WithValueThreshold(1 << 10)
})

// testLog returns a command entry at idx carrying data, like raft-boltdb's
// test helper of the same name.
func testLog(idx uint64, data string) *raft.Log {
	return &raft.Log{Index: idx, Data: []byte(data)}
}

// testLogs returns command entries for every index from first to last.
func testLogs(first, last uint64) []*raft.Log {
	var logs []*raft.Log
	for i := first; i <= last; i++ {
		logs = append(logs, testLog(i, "log"))
	}
	return logs
}

// storeLogs stores logs or fails the test.
func storeLogs(tb testing.TB, s *raftstore.Store, logs []*raft.Log) {
	tb.Helper()
	if err := s.StoreLogs(logs); err != nil {
		tb.Fatalf("StoreLogs: %v", err)
	}
}

// indexes returns FirstIndex and LastIndex or fails the test.
func indexes(tb testing.TB, s *raftstore.Store) (first, last uint64) {
	tb.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		tb.Fatalf("FirstIndex: %v", err)
	}
	last, err = s.LastIndex()
	if err != nil {
		tb.Fatalf("LastIndex: %v", err)
	}
	return first, last
}

// present returns the indexes from lo to hi that GetLog finds, failing the
// test on any error other than raft.ErrLogNotFound.
func present(tb testing.TB, s *raftstore.Store, lo, hi uint64) []uint64 {
	tb.Helper()
	var got []uint64
	for i := lo; i <= hi; i++ {
		var l raft.Log
		switch err := s.GetLog(i, &l); err {
		case nil:
			if l.Index != i {
				tb.Fatalf("GetLog(%d) returned index %d", i, l.Index)
			}
			got = append(got, i)
		case raft.ErrLogNotFound:
		default:
			tb.Fatalf("GetLog(%d): %v", i, err)
		}
	}
	return got
}

// span returns the indexes from lo to hi inclusive.
func span(lo, hi uint64) []uint64 {
	var out []uint64
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}
