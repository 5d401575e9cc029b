package raftstore_test

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
)

func TestStableNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		// Other keys and log entries must not make a missing key appear.
		if err := s.Set([]byte("other"), []byte("v")); err != nil {
			t.Fatalf("Set: %v", err)
		}
		storeLogs(t, s, testLogs(1, 3))

		val, err := s.Get([]byte("bad"))
		if err != store.ErrKeyNotFound || val != nil {
			t.Errorf("Get(missing) = %q, %v; want nil, ErrKeyNotFound", val, err)
		}
		n, err := s.GetUint64([]byte("bad"))
		if err != store.ErrKeyNotFound || n != 0 {
			t.Errorf("GetUint64(missing) = %d, %v; want 0, ErrKeyNotFound", n, err)
		}
		// Raft recognises a missing key by the error's text alone.
		if err == nil || err.Error() != "not found" {
			t.Errorf("missing-key error text = %v; want exactly \"not found\"", err)
		}
	})
}

func TestKeyspacesAreSeparate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		// Stable keys that look like log keys must not show up as entries.
		for _, k := range [][]byte{{'l', 0, 0, 0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 0, 0, 2}, []byte("l")} {
			if err := s.Set(k, []byte("v")); err != nil {
				t.Fatalf("Set(%x): %v", k, err)
			}
		}
		if first, last := indexes(t, s); first != 0 || last != 0 {
			t.Fatalf("first, last = %d, %d; want 0, 0", first, last)
		}
		if err := s.GetLog(1, new(raft.Log)); err != raft.ErrLogNotFound {
			t.Fatalf("GetLog(1) = %v; want raft.ErrLogNotFound", err)
		}
		// And deleting every log entry must leave stable values alone.
		storeLogs(t, s, testLogs(1, 5))
		if err := s.DeleteRange(0, ^uint64(0)); err != nil {
			t.Fatalf("DeleteRange: %v", err)
		}
		if v, err := s.Get([]byte("l")); err != nil || string(v) != "v" {
			t.Fatalf("Get after DeleteRange = %q, %v; want \"v\", nil", v, err)
		}
	})
}
