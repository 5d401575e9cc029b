package counter

import (
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// lineRef is line.at worked out with big integers.
func lineRef(l line, t, end int64, w time.Duration) int64 {
	if l.rate <= 0 || t <= l.from {
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
