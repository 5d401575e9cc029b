package store_test

import (
	"testing"

	"github.com/sluicehq/sluice/store"
)

// backend names a way of opening a Store for tests.
type backend struct {
	name string
	// disk reports whether the store lives in a directory that survives Close.
	disk bool
}

// backends are the configurations every test of the stable keyspace runs
// against; package raftstore runs the log's against the same.
var backends = []backend{
	{name: "memory"},
	{name: "disk", disk: true},
}

// open opens a fresh store for b, closed when the test ends.
func (b backend) open(tb testing.TB) *store.Store {
	tb.Helper()
	dir := ""
	if b.disk {
		dir = tb.TempDir()
	}
	s, err := store.Open(dir)
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

// forEachBackend runs fn as a subtest for every backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}
