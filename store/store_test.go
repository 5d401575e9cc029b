package store_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/sluicehq/sluice/store"
)

func TestOpenLockedDir(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if s2, err := store.Open(dir); err == nil {
		s2.Close()
		t.Fatal("second Open of the same directory succeeded; want error")
	} else if !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open error %q does not name the directory", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		dir := ""
		if b.disk {
			dir = t.TempDir()
		}
		s, err := store.Open(dir)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close = %v; want nil", err)
		}
		ops := map[string]func() error{
			"Set":       func() error { return s.Set([]byte("k"), []byte("v")) },
			"Get":       func() error { _, err := s.Get([]byte("k")); return err },
			"SetUint64": func() error { return s.SetUint64([]byte("k"), 1) },
			"GetUint64": func() error { _, err := s.GetUint64([]byte("k")); return err },
			"Do":        func() error { return s.Do(func(*badger.DB) error { return nil }) },
		}
		for name, op := range ops {
			if err := op(); !errors.Is(err, store.ErrClosed) {
				t.Errorf("%s after Close = %v; want ErrClosed", name, err)
			}
		}
	})
}

func TestWithLogger(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := store.Open(t.TempDir(), store.WithLogger(logger))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Badger logs while opening and closing; the messages must arrive
	// through slog, tagged, without Badger's trailing newlines.
	out := buf.String()
	if !strings.Contains(out, "component=badger") {
		t.Fatalf("no badger output reached the logger:\n%s", out)
	}
	if strings.Contains(out, `\n"`) {
		t.Fatalf("logged messages keep trailing newlines:\n%s", out)
	}
}
