package counter

import (
	"math"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// lineRef is line.at worked out with big integers.
func lineRef(l line, t, end int64, w time.Duration) int64 {
	if l.stop > 0 && l.stop < end {
		end = l.stop
	}
	if l.rate <= 0 || t <= l.from || end <= l.from {
		return l.base
	}
	t = min(t, end)
	v := new(big.Int).Mul(big.NewInt(l.rate), big.NewInt(t-l.from))
	v.Quo(v, big.NewInt(int64(w)))
	if !v.IsInt64() || v.Int64() > maxEntry-l.base {
		return -1 // beyond what a count holds; at saturates
	}
	return l.base + v.Int64()
}

// TestLineProperties checks a grant line against a big-integer reference,
// that it never shrinks with time, and that until names the first moment
// it reaches a value.
func TestLineProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Hour)).Draw(t, "w"))
		end := rapid.Int64Range(int64(w), 1<<50).Draw(t, "end")
		start := end - int64(w)
		l := line{
			base: rapid.Int64Range(0, 1_000_000).Draw(t, "base"),
			rate: rapid.Int64Range(0, 1_000_000).Draw(t, "rate"),
			from: rapid.Int64Range(start, end).Draw(t, "from"),
		}
		if rapid.Bool().Draw(t, "stops") {
			l.stop = rapid.Int64Range(start, end+int64(w)).Draw(t, "stop")
		}
		a := rapid.Int64Range(start, end+int64(w)).Draw(t, "a")
		b := rapid.Int64Range(a, end+int64(w)).Draw(t, "b")
		va, vb := l.at(a, end, w), l.at(b, end, w)
		if ref := lineRef(l, a, end, w); ref >= 0 && va != ref {
			t.Fatalf("%+v at %d = %d, reference %d", l, a, va, ref)
		}
		if vb < va {
			t.Fatalf("%+v shrinks: %d at %d, %d at %d", l, va, a, vb, b)
		}
		v := l.base + rapid.Int64Range(0, 2_000_000).Draw(t, "v")
		wait, ok := l.until(v, a, end, w)
		switch {
		case !ok:
			if l.at(end, end, w) >= v {
				t.Fatalf("%+v reaches %d by the window's end, until says never", l, v)
			}
		case wait < 0:
			t.Fatalf("%+v: until(%d) = %v", l, v, wait)
		case l.at(a+int64(wait), end, w) < v:
			t.Fatalf("%+v below %d %v after %d", l, v, wait, a)
		case wait > 0 && l.at(a+int64(wait)-1, end, w) >= v:
			t.Fatalf("%+v reaches %d before %v after %d", l, v, wait, a)
		}
	})
}

// TestLineRemainders checks that fractions rounded off several lines add up
// to what one line of their summed rate admits.
func TestLineRemainders(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Minute)).Draw(t, "w"))
		end := int64(w) * 1000
		n := rapid.IntRange(1, 64).Draw(t, "lines")
		at := rapid.Int64Range(end-int64(w), end).Draw(t, "at")
		from := end - int64(w)
		var sum, rate int64
		var rem big.Int
		for range n {
			r := rapid.Int64Range(0, 10_000).Draw(t, "rate")
			l := line{rate: r, from: from}
			v, fr := l.atRem(at, end, w)
			sum += v
			rem.Add(&rem, new(big.Int).SetUint64(fr))
			rate += r
		}
		whole := line{rate: rate, from: from}.at(at, end, w)
		q := new(big.Int).Quo(&rem, big.NewInt(int64(w))).Int64()
		if sum+q != whole {
			t.Fatalf("%d lines: %d whole + %d from fractions, one line of the summed rate %d", n, sum, q, whole)
		}
	})
}

// TestLineStop checks a line that stops growing before its window ends: it
// holds its value from stop on, and until does not look past stop.
func TestLineStop(t *testing.T) {
	const w = time.Second
	end := int64(10 * w)
	start := end - int64(w)
	l := line{base: 2, rate: 100, from: start, stop: end - int64(200*time.Millisecond)}
	tests := []struct {
		name string
		at   int64
		want int64
	}{
		{"at from", start, 2},
		{"half way", start + int64(w/2), 52},
		{"at stop", l.stop, 82},
		{"after stop", l.stop + int64(100*time.Millisecond), 82},
		{"at the end", end, 82},
	}
	for _, tt := range tests {
		if got := l.at(tt.at, end, w); got != tt.want {
			t.Errorf("%s: at = %d, want %d", tt.name, got, tt.want)
		}
	}
	if _, ok := l.until(83, start, end, w); ok {
		t.Error("until(83) is reachable, but the line stops at 82")
	}
	if wait, ok := l.until(82, start, end, w); !ok || wait != 800*time.Millisecond {
		t.Errorf("until(82) = %v, %v; want 800ms, true", wait, ok)
	}
	if got := (line{base: 5, rate: 100, from: end - 10, stop: end - 20}).at(end, end, w); got != 5 {
		t.Errorf("a line granted after its stop grows to %d, want its base 5", got)
	}
}

// TestLineRate checks that the nodes' parts of the decay add up to it:
// each part is its exact share rounded down or up, never further, and
// over many nodes the parts sum to about the decay, where shares rounded
// down fall short by up to a hit each.
func TestLineRate(t *testing.T) {
	for _, tc := range []struct {
		name              string
		prev, need, nodes int64
	}{
		{"exact shares", 420, 1, 60},
		{"63 nodes of 6.76", 426, 1, 63},
		{"uneven needs", 500, 3, 40},
		{"under a hit each", 30, 1, 64},
		{"two nodes", 45, 5, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total := tc.need * tc.nodes
			exact := float64(tc.prev*tc.need) / float64(total)
			for idx := int64(100); idx < 110; idx++ {
				sum := int64(0)
				for inc := uint32(1); inc <= uint32(tc.nodes); inc++ {
					r := lineRate(tc.prev, tc.need, total, inc, idx)
					if float64(r) < exact-1 || float64(r) > exact+1 || (exact == float64(int64(exact)) && float64(r) != exact) {
						t.Fatalf("window %d, node %d: rate %d, exact share %.2f", idx, inc, r, exact)
					}
					sum += r
				}
				// The sum of rounded-down shares misses by the fractions;
				// the dithered sum is off by far less, in either direction.
				if diff := math.Abs(float64(sum - tc.prev)); diff > 2*math.Sqrt(float64(tc.nodes))+1 {
					t.Errorf("window %d: the rates sum to %d, the decay is %d", idx, sum, tc.prev)
				}
			}
		})
	}
}
