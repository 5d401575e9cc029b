package metric

import (
	"sync"
	"testing"
	"time"
)

func TestBound(t *testing.T) {
	want := []time.Duration{time.Microsecond, 2500 * time.Nanosecond, 5 * time.Microsecond, 10 * time.Microsecond,
		25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond,
		500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
		250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond}
	if len(want) != Bounds {
		t.Fatalf("%d bounds listed, Bounds = %d", len(want), Bounds)
	}
	for i, w := range want {
		if got := time.Duration(Bound(i)); got != w {
			t.Errorf("Bound(%d) = %v, want %v", i, got, w)
		}
	}
}

// TestObserve checks which bucket an observation lands in: the first
// whose bound it does not pass, the last for what passes them all.
func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ns     int64
		bucket int
	}{
		{"negative: a clock stepped back", -5, 0},
		{"zero", 0, 0},
		{"on the first bound", 1000, 0},
		{"just past it", 1001, 1},
		{"on the second", 2500, 1},
		{"a millisecond", int64(time.Millisecond), 9},
		{"just past a millisecond", int64(time.Millisecond) + 1, 10},
		{"on the last bound", Bound(Bounds - 1), Bounds - 1},
		{"past every bound", Bound(Bounds-1) + 1, Bounds},
		{"an hour", int64(time.Hour), Bounds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			h.Observe(tc.ns)
			s := h.Snapshot()
			for i, c := range s.Counts {
				if want := uint64(0); i == tc.bucket && c != 1 || i != tc.bucket && c != want {
					t.Errorf("bucket %d holds %d", i, c)
				}
			}
			if s.Count != 1 || s.Sum != max(tc.ns, 0) {
				t.Errorf("Count %d, Sum %d; want 1, %d", s.Count, s.Sum, max(tc.ns, 0))
			}
		})
	}
}

// TestObserveConcurrently checks that observations from many goroutines
// are all counted (and, under -race, that they do not race).
func TestObserveConcurrently(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				h.Observe(int64(g*1000 + i))
			}
		})
	}
	wg.Wait()
	if s := h.Snapshot(); s.Count != 8000 {
		t.Fatalf("Count = %d, want 8000", s.Count)
	}
}
