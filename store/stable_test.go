package store_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/store"
)

func TestSetGet(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
		val  []byte
		want []byte
	}{
		{name: "like raft-boltdb", key: []byte("hello"), val: []byte("world"), want: []byte("world")},
		{name: "raft vote candidate", key: []byte("LastVoteCand"), val: []byte("node-1"), want: []byte("node-1")},
		{name: "binary", key: []byte{0, 0xff, 'l'}, val: []byte{0, 1, 2, 0xff}, want: []byte{0, 1, 2, 0xff}},
		{name: "empty key", key: []byte{}, val: []byte("v"), want: []byte("v")},
		// raft-boltdb returns a nil slice for an empty value; so does Store.
		{name: "empty value", key: []byte("k"), val: []byte{}, want: nil},
		{name: "large value", key: []byte("big"), val: bytes.Repeat([]byte("x"), 100<<10), want: bytes.Repeat([]byte("x"), 100<<10)},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := b.open(t)
				if err := s.Set(tt.key, tt.val); err != nil {
					t.Fatalf("Set: %v", err)
				}
				got, err := s.Get(tt.key)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if !bytes.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
					t.Fatalf("Get = %q (nil %t); want %q (nil %t)", got, got == nil, tt.want, tt.want == nil)
				}
			})
		}
	})
}

func TestSetOverwritesAndGetCopies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		key := []byte("CurrentTerm")
		for _, v := range []string{"one", "two"} {
			if err := s.Set(key, []byte(v)); err != nil {
				t.Fatalf("Set(%q): %v", v, err)
			}
		}
		got, err := s.Get(key)
		if err != nil || string(got) != "two" {
			t.Fatalf("Get = %q, %v; want \"two\", nil", got, err)
		}
		// The returned slice belongs to the caller.
		got[0] = 'X'
		again, err := s.Get(key)
		if err != nil || string(again) != "two" {
			t.Fatalf("Get after modifying a previous result = %q, %v; want \"two\", nil", again, err)
		}
	})
}

func TestSetUint64GetUint64(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
		val  uint64
	}{
		{name: "like raft-boltdb", key: []byte("abc"), val: 123},
		{name: "zero", key: []byte("CurrentTerm"), val: 0},
		{name: "max", key: []byte("LastVoteTerm"), val: ^uint64(0)},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := b.open(t)
				if err := s.SetUint64(tt.key, tt.val); err != nil {
					t.Fatalf("SetUint64: %v", err)
				}
				got, err := s.GetUint64(tt.key)
				if err != nil || got != tt.val {
					t.Fatalf("GetUint64 = %d, %v; want %d, nil", got, err, tt.val)
				}
				// raft-boltdb stores uint64s as 8 big-endian bytes; keep the
				// same representation so Get sees the same bytes.
				raw, err := s.Get(tt.key)
				if err != nil || len(raw) != 8 {
					t.Fatalf("Get = %x, %v; want 8 bytes", raw, err)
				}
			})
		}
	})
}

func TestGetUint64WrongSize(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		for _, val := range [][]byte{{}, {1, 2, 3}, make([]byte, 9)} {
			if err := s.Set([]byte("k"), val); err != nil {
				t.Fatalf("Set: %v", err)
			}
			if n, err := s.GetUint64([]byte("k")); !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("GetUint64 of %d-byte value = %d, %v; want ErrCorrupt", len(val), n, err)
			}
		}
	})
}

func TestStableNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		// Other keys must not make a missing key appear.
		if err := s.Set([]byte("other"), []byte("v")); err != nil {
			t.Fatalf("Set: %v", err)
		}
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

func TestReopenKeepsValues(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Set([]byte("counts"), []byte("v1")); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatalf("SetUint64: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s, err = store.Open(dir); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if v, err := s.Get([]byte("counts")); err != nil || string(v) != "v1" {
		t.Errorf("Get after reopen = %q, %v; want \"v1\", nil", v, err)
	}
	if n, err := s.GetUint64([]byte("CurrentTerm")); err != nil || n != 7 {
		t.Errorf("GetUint64 after reopen = %d, %v; want 7, nil", n, err)
	}
}
