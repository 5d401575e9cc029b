package raftstore_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
)

func TestReopen(t *testing.T) {
	tests := []struct {
		name string
		opts []store.Option
	}{
		{name: "sync"},
		{name: "nosync", opts: []store.Option{store.WithSync(false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openStore(dir, tt.opts...)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			appended := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
			logs := []*raft.Log{
				{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("conf"), AppendedAt: appended},
				{Index: 2, Term: 1, Type: raft.LogNoop},
				{Index: 3, Term: 2, Data: []byte("cmd"), Extensions: []byte("ext")},
				{Index: 4, Term: 2, Data: []byte("gone")},
			}
			storeLogs(t, s, logs)
			if err := s.DeleteRange(4, 4); err != nil {
				t.Fatalf("DeleteRange: %v", err)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 2); err != nil {
				t.Fatalf("SetUint64: %v", err)
			}
			if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
				t.Fatalf("Set: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}

			s, err = openStore(dir, tt.opts...)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer s.Close()

			if first, last := indexes(t, s); first != 1 || last != 3 {
				t.Fatalf("after reopen first, last = %d, %d; want 1, 3", first, last)
			}
			for _, want := range logs[:3] {
				var got raft.Log
				if err := s.GetLog(want.Index, &got); err != nil {
					t.Fatalf("GetLog(%d): %v", want.Index, err)
				}
				if !reflect.DeepEqual(&got, want) {
					t.Fatalf("GetLog(%d) = %#v; want %#v", want.Index, got, *want)
				}
			}
			if err := s.GetLog(4, new(raft.Log)); err != raft.ErrLogNotFound {
				t.Fatalf("GetLog(4) = %v; want raft.ErrLogNotFound", err)
			}
			if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 2 {
				t.Fatalf("GetUint64 = %d, %v; want 2, nil", term, err)
			}
			if cand, err := s.Get([]byte("LastVoteCand")); err != nil || string(cand) != "node-2" {
				t.Fatalf("Get = %q, %v; want \"node-2\", nil", cand, err)
			}
		})
	}
}

func TestMemoryStoreIsFresh(t *testing.T) {
	s, err := openStore("")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	storeLogs(t, s, testLogs(1, 3))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s, err = openStore("")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if first, last := indexes(t, s); first != 0 || last != 0 {
		t.Fatalf("new in-memory store has first, last = %d, %d; want 0, 0", first, last)
	}
}

func TestLogUseAfterClose(t *testing.T) {
	s, err := openStore("")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ops := map[string]func() error{
		"FirstIndex":  func() error { _, err := s.FirstIndex(); return err },
		"LastIndex":   func() error { _, err := s.LastIndex(); return err },
		"GetLog":      func() error { return s.GetLog(1, new(raft.Log)) },
		"StoreLog":    func() error { return s.StoreLog(testLog(1, "x")) },
		"StoreLogs":   func() error { return s.StoreLogs(testLogs(1, 2)) },
		"DeleteRange": func() error { return s.DeleteRange(1, 2) },
		"SetUint64":   func() error { return s.SetUint64([]byte("k"), 1) },
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v; want store.ErrClosed", name, err)
		}
	}
}
