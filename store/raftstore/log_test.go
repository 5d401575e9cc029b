package raftstore_test

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
)

func TestFirstLastIndex(t *testing.T) {
	tests := []struct {
		name      string
		logs      []*raft.Log
		wantFirst uint64
		wantLast  uint64
	}{
		{name: "empty", wantFirst: 0, wantLast: 0},
		{name: "one", logs: testLogs(7, 7), wantFirst: 7, wantLast: 7},
		{name: "three", logs: testLogs(1, 3), wantFirst: 1, wantLast: 3},
		{name: "unordered with gap", logs: []*raft.Log{testLog(9, "c"), testLog(2, "a"), testLog(5, "b")}, wantFirst: 2, wantLast: 9},
		// Keys are big-endian, so 256 must sort after 255 and 2^63 after both.
		{name: "byte boundaries", logs: []*raft.Log{testLog(256, "b"), testLog(255, "a"), testLog(1<<63, "c")}, wantFirst: 255, wantLast: 1 << 63},
		{name: "max index", logs: []*raft.Log{testLog(^uint64(0), "max"), testLog(1, "one")}, wantFirst: 1, wantLast: ^uint64(0)},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := b.open(t)
				if len(tt.logs) > 0 {
					storeLogs(t, s, tt.logs)
				}
				first, last := indexes(t, s)
				if first != tt.wantFirst || last != tt.wantLast {
					t.Fatalf("first, last = %d, %d; want %d, %d", first, last, tt.wantFirst, tt.wantLast)
				}
			})
		}
	})
}

func TestGetLogNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		storeLogs(t, s, testLogs(10, 12))
		for _, idx := range []uint64{0, 1, 9, 13, ^uint64(0)} {
			// Raft compares with ==, so the error must not be wrapped.
			if err := s.GetLog(idx, new(raft.Log)); err != raft.ErrLogNotFound {
				t.Errorf("GetLog(%d) = %v; want raft.ErrLogNotFound", idx, err)
			}
		}
	})
}

func TestStoreAndGetLog(t *testing.T) {
	appended := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	tests := []struct {
		name string
		log  *raft.Log
	}{
		{name: "command", log: testLog(1, "log1")},
		{name: "all fields", log: &raft.Log{
			Index: 42, Term: 7, Type: raft.LogConfiguration,
			Data: []byte("config"), Extensions: []byte{0, 1, 2}, AppendedAt: appended,
		}},
		{name: "noop without data", log: &raft.Log{Index: 3, Term: 1, Type: raft.LogNoop}},
		{name: "empty non-nil slices", log: &raft.Log{Index: 4, Term: 1, Data: []byte{}, Extensions: []byte{}}},
		{name: "large data", log: &raft.Log{Index: 5, Term: 2, Data: make([]byte, 64<<10)}},
		{name: "unix epoch is not zero time", log: &raft.Log{Index: 6, AppendedAt: time.Unix(0, 0).UTC()}},
		{name: "max values", log: &raft.Log{Index: ^uint64(0), Term: ^uint64(0), Type: raft.LogType(255)}},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := b.open(t)
				if err := s.StoreLog(tt.log); err != nil {
					t.Fatalf("StoreLog: %v", err)
				}
				// Every field must be overwritten, including ones set here.
				got := raft.Log{Data: []byte("stale"), Extensions: []byte("stale"), AppendedAt: time.Now(), Term: 99}
				if err := s.GetLog(tt.log.Index, &got); err != nil {
					t.Fatalf("GetLog: %v", err)
				}
				if !reflect.DeepEqual(&got, tt.log) {
					t.Fatalf("GetLog = %#v\nwant %#v", got, *tt.log)
				}
			})
		}
	})
}

func TestStoreLogAppendedAtLocal(t *testing.T) {
	// Raft stamps entries with time.Now(), which carries a monotonic reading
	// and a location; the instant must survive, the representation need not.
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		now := time.Now()
		if err := s.StoreLog(&raft.Log{Index: 1, AppendedAt: now}); err != nil {
			t.Fatalf("StoreLog: %v", err)
		}
		var got raft.Log
		if err := s.GetLog(1, &got); err != nil {
			t.Fatalf("GetLog: %v", err)
		}
		if !got.AppendedAt.Equal(now) {
			t.Fatalf("AppendedAt = %v; want %v", got.AppendedAt, now)
		}
	})
}

func TestStoreLogOverwrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		storeLogs(t, s, []*raft.Log{{Index: 1, Term: 1, Data: []byte("old")}})
		storeLogs(t, s, []*raft.Log{{Index: 1, Term: 2, Data: []byte("new")}})
		var got raft.Log
		if err := s.GetLog(1, &got); err != nil {
			t.Fatalf("GetLog: %v", err)
		}
		if got.Term != 2 || string(got.Data) != "new" {
			t.Fatalf("GetLog = term %d data %q; want term 2 data \"new\"", got.Term, got.Data)
		}
	})
}

func TestStoreLogsErrors(t *testing.T) {
	tests := []struct {
		name string
		logs []*raft.Log
	}{
		{name: "nil entry", logs: []*raft.Log{testLog(1, "a"), nil}},
		{name: "time beyond unix nanos", logs: []*raft.Log{{Index: 1, AppendedAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}}},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := b.open(t)
				if err := s.StoreLogs(tt.logs); err == nil {
					t.Fatal("StoreLogs succeeded; want error")
				}
				// Nothing from a rejected batch may be stored.
				if first, last := indexes(t, s); first != 0 || last != 0 {
					t.Fatalf("after failed StoreLogs first, last = %d, %d; want 0, 0", first, last)
				}
			})
		}
	})
}

func TestStoreLogs(t *testing.T) {
	tests := []struct {
		name  string
		first uint64
		last  uint64
		small bool // use tiny Badger transactions to force splitting
	}{
		{name: "empty batch", first: 1, last: 0},
		{name: "two", first: 1, last: 2},
		{name: "hundred", first: 100, last: 199},
		{name: "split across transactions", first: 1, last: 5000, small: true},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var opts []store.Option
				if tt.small {
					opts = append(opts, smallTxns)
				}
				s := b.open(t, opts...)
				var logs []*raft.Log
				for i := tt.first; i <= tt.last; i++ {
					logs = append(logs, &raft.Log{Index: i, Term: i / 10, Data: fmt.Appendf(nil, "entry-%d-%0100d", i, 0)})
				}
				storeLogs(t, s, logs)

				var wantFirst, wantLast uint64
				if len(logs) > 0 {
					wantFirst, wantLast = tt.first, tt.last
				}
				if first, last := indexes(t, s); first != wantFirst || last != wantLast {
					t.Fatalf("first, last = %d, %d; want %d, %d", first, last, wantFirst, wantLast)
				}
				for _, want := range logs {
					var got raft.Log
					if err := s.GetLog(want.Index, &got); err != nil {
						t.Fatalf("GetLog(%d): %v", want.Index, err)
					}
					if !reflect.DeepEqual(&got, want) {
						t.Fatalf("GetLog(%d) = %#v; want %#v", want.Index, got, *want)
					}
				}
			})
		}
	})
}

func TestDeleteRange(t *testing.T) {
	tests := []struct {
		name     string
		stored   []uint64 // indexes stored before the delete
		min, max uint64
		want     []uint64 // indexes left afterwards
		small    bool     // use tiny Badger transactions to force splitting
	}{
		{name: "prefix like raft-boltdb", stored: span(1, 3), min: 1, max: 2, want: []uint64{3}},
		{name: "prefix after snapshot", stored: span(1, 10), min: 1, max: 6, want: span(7, 10)},
		{name: "suffix after conflict", stored: span(1, 10), min: 7, max: 10, want: span(1, 6)},
		{name: "suffix past the end", stored: span(1, 10), min: 8, max: ^uint64(0), want: span(1, 7)},
		{name: "middle", stored: span(1, 10), min: 4, max: 5, want: []uint64{1, 2, 3, 6, 7, 8, 9, 10}},
		{name: "single", stored: span(1, 10), min: 5, max: 5, want: []uint64{1, 2, 3, 4, 6, 7, 8, 9, 10}},
		{name: "everything", stored: span(1, 10), min: 1, max: 10, want: nil},
		{name: "wider than the log", stored: span(5, 10), min: 0, max: ^uint64(0), want: nil},
		{name: "below the log", stored: span(5, 10), min: 1, max: 4, want: span(5, 10)},
		{name: "above the log", stored: span(5, 10), min: 11, max: 20, want: span(5, 10)},
		{name: "min above max", stored: span(1, 10), min: 6, max: 5, want: span(1, 10)},
		{name: "empty log", stored: nil, min: 1, max: 10, want: nil},
		{name: "gaps in the log", stored: []uint64{1, 3, 5, 7, 9}, min: 2, max: 7, want: []uint64{1, 9}},
		{name: "split prefix", stored: span(1, 6000), min: 1, max: 5000, want: span(5001, 6000), small: true},
		{name: "split suffix", stored: span(1, 6000), min: 1001, max: 6000, want: span(1, 1000), small: true},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var opts []store.Option
				if tt.small {
					opts = append(opts, smallTxns)
				}
				s := b.open(t, opts...)
				var logs []*raft.Log
				for _, i := range tt.stored {
					logs = append(logs, testLog(i, "x"))
				}
				storeLogs(t, s, logs)

				if err := s.DeleteRange(tt.min, tt.max); err != nil {
					t.Fatalf("DeleteRange(%d, %d): %v", tt.min, tt.max, err)
				}

				hi := uint64(0)
				if len(tt.stored) > 0 {
					hi = slices.Max(tt.stored)
				}
				if got := present(t, s, 0, hi); !slices.Equal(got, tt.want) {
					t.Fatalf("left %v; want %v", got, tt.want)
				}
				var wantFirst, wantLast uint64
				if len(tt.want) > 0 {
					wantFirst, wantLast = tt.want[0], tt.want[len(tt.want)-1]
				}
				if first, last := indexes(t, s); first != wantFirst || last != wantLast {
					t.Fatalf("first, last = %d, %d; want %d, %d", first, last, wantFirst, wantLast)
				}
			})
		}
	})
}

func TestConcurrentLogAccess(t *testing.T) {
	// Raft reads entries from replication goroutines while its main loop
	// appends and the snapshot goroutine compacts. Run all three at once and
	// check the end state; the race detector checks the rest.
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		storeLogs(t, s, testLogs(1, 1000))

		var wg sync.WaitGroup
		errs := make(chan error, 3)
		wg.Go(func() { // appender: 1001..2000 in batches of 50
			for lo := uint64(1001); lo <= 2000; lo += 50 {
				if err := s.StoreLogs(testLogs(lo, lo+49)); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() { // compactor: drops 1..490 in steps of 10
			for max := uint64(10); max <= 490; max += 10 {
				if err := s.DeleteRange(1, max); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() { // reader: entry 750 is never deleted
			for range 200 {
				var l raft.Log
				if err := s.GetLog(750, &l); err != nil {
					errs <- fmt.Errorf("GetLog(750): %w", err)
					return
				}
				if _, err := s.FirstIndex(); err != nil {
					errs <- err
					return
				}
				if _, err := s.LastIndex(); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if first, last := indexes(t, s); first != 491 || last != 2000 {
			t.Fatalf("first, last = %d, %d; want 491, 2000", first, last)
		}
	})
}
