package window

import (
	"encoding/binary"
	"testing"
	"time"
)

// Bounds of the rules FuzzDecide draws.
const (
	fuzzMaxCount  = 1_000_000
	fuzzMaxWindow = int64(time.Hour)
	fuzzMaxSteps  = 100
	fuzzStepBytes = 5
)

// FuzzDecide drives the window decision as the counters do (Position, then
// DecideAt on counts the harness keeps per window) for a rule and a
// sequence of checks drawn from the input, and compares every answer with
// the slow reference: allowed, remaining, retry_after and reset_after must
// be equal at every step, Decide must agree with DecideAt, Remaining and
// RemainingAt with the room before the check, and a refused
// check retried at exactly now + RetryAfter with nothing else arriving
// must be admitted, a nanosecond earlier not.
//
// The input: count (1 … 10^6), window (1ms … 1h), fixed or sliding, the
// first moment, and steps of 5 bytes each: how far time moves (a short
// gap, up to three windows, to just around the next boundary, exactly the
// last refusal's RetryAfter or a nanosecond less, …) and the hits (0, 1,
// count, count + 1, or some number up to count), or hits admitted
// elsewhere that the counts take in undecided, so that they can exceed the
// count as a fleet's view can.
func FuzzDecide(f *testing.F) {
	// count and window are drawn as 1 + count and 1ms + window.
	f.Add(uint32(9), uint64(10*time.Second-time.Millisecond), false, int64(1_800_000_000)*int64(time.Second),
		[]byte{0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0, 4, 0, 0, 1, 0})
	f.Add(uint32(1), uint64(0), true, int64(0), []byte{5, 0, 0, 1, 0, 5, 0, 0, 1, 0, 5, 0, 0, 1, 0, 3, 0, 0, 1, 0})
	f.Add(uint32(999_999), uint64(time.Hour-time.Millisecond), false, int64(-1), []byte{1, 0xff, 0xff, 2, 0, 2, 1, 0, 2, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, count uint32, win uint64, fixed bool, start int64, steps []byte) {
		r := &Rule{
			Name:         "fuzz",
			Count:        1 + int64(count%fuzzMaxCount),
			Window:       time.Duration(int64(MinWindow) + int64(win%uint64(fuzzMaxWindow-int64(MinWindow)+1))),
			SyncInterval: Strict,
		}
		if fixed {
			r.Type = Fixed
		}
		w := int64(r.Window)
		// Any moment within ±2^61 ns (±73 years of 1970), before 1970
		// too: steps then cannot overflow.
		now := start % (1 << 61)
		h := &harnessKey{rule: r}
		ref := &reference{count: r.Count, w: w, sliding: r.Type == Sliding}
		var lastRetry int64
		for i := 0; i+fuzzStepBytes <= len(steps) && i/fuzzStepBytes < fuzzMaxSteps; i += fuzzStepBytes {
			s := steps[i : i+fuzzStepBytes]
			now += advance(s[0], binary.LittleEndian.Uint16(s[1:]), w, now, lastRetry)
			hits := drawHits(binary.LittleEndian.Uint16(s[3:]), r.Count)
			if s[0]&elsewhere != 0 {
				h.add(now, hits)
				ref.add(now, hits)
				continue
			}

			c := h.at(now)
			got := h.allow(now, hits)
			want := ref.allow(now, hits)
			if got.Allowed != want.allowed || got.Remaining != want.remaining ||
				got.RetryAfter != want.retryAfter || got.ResetAfter != want.resetAfter ||
				got.Limit != r.Count || got.Path != PathLocal {
				t.Fatalf("rule %d per %v %v, step %d at %d (+%v into its window), counts %+v, hits %d:\n"+
					" DecideAt: allowed %v remaining %d retry_after %v reset_after %v limit %d\n"+
					" reference: allowed %v remaining %d retry_after %v reset_after %v",
					r.Count, r.Window, r.Type, i/fuzzStepBytes, now, Elapsed(now, r.Window), c, hits,
					got.Allowed, got.Remaining, got.RetryAfter, got.ResetAfter, got.Limit,
					want.allowed, want.remaining, want.retryAfter, want.resetAfter)
			}
			if d := r.Decide(c, now, hits); d.At != now || d.Allowed != got.Allowed || d.Remaining != got.Remaining ||
				d.RetryAfter != got.RetryAfter || d.ResetAfter != got.ResetAfter {
				t.Fatalf("step %d: Decide %+v disagrees with DecideAt %+v", i/fuzzStepBytes, d, got)
			}
			// What the counters read without deciding: the room before
			// this check.
			before := want.remaining
			if want.allowed && hits > 0 {
				before += hits
			}
			if left := r.Remaining(c, now); left != before || r.RemainingAt(c, Elapsed(now, r.Window)) != left {
				t.Fatalf("step %d: Remaining before the check = %d, RemainingAt %d; the reference had %d",
					i/fuzzStepBytes, left, r.RemainingAt(c, Elapsed(now, r.Window)), before)
			}
			lastRetry = int64(got.RetryAfter)
			if got.Allowed || got.RetryAfter == 0 {
				continue
			}
			need := max(hits, 1)
			back := now + int64(got.RetryAfter)
			idx, elapsed := Position(back, r.Window)
			if d := r.DecideAt(h.peek(idx), elapsed, need); !d.Allowed {
				t.Fatalf("step %d: %d hits refused at %d with retry_after %v; refused again at exactly %d: %+v",
					i/fuzzStepBytes, need, now, got.RetryAfter, back, d)
			}
			if early := back - 1; early >= now && r.Fits(h.peek(Index(early, r.Window)), early, need) {
				t.Fatalf("step %d: %d hits refused at %d with retry_after %v fit a nanosecond earlier",
					i/fuzzStepBytes, need, now, got.RetryAfter)
			}
		}
	})
}

// elsewhere, set in a step's first byte, makes the step hits admitted
// elsewhere in the fleet, which the key's counts take in without a
// decision, as a node merges its peers' counts: a view can then hold more
// than the count, as after a partition.
const elsewhere = 0x80

// advance is how far time moves before a step, chosen by kind.
func advance(kind uint8, p uint16, w, now, lastRetry int64) int64 {
	switch kind % 8 {
	case 0: // a short gap, within a fiftieth of the window
		return int64(p) % (w/50 + 1)
	case 1: // anywhere in the next three windows
		return int64(uint64(p) * uint64(3*w) >> 16)
	case 2: // to within 2 ns of the next boundary
		next := w - Elapsed(now, time.Duration(w)).Nanoseconds()
		return max(next+int64(p%5)-2, 0)
	case 3: // exactly the last refusal's wait
		return lastRetry
	case 4: // a nanosecond short of it
		return max(lastRetry-1, 0)
	case 5: // no time at all
		return 0
	case 6: // past everything counted
		return 2*w + int64(p)
	}
	return int64(p) // a few nanoseconds
}

// drawHits is a step's hits: 0, 1, the count, one more than it, a little
// less than it, or some number up to it.
func drawHits(p uint16, count int64) int64 {
	v := int64(p >> 3)
	switch p & 7 {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return count
	case 3:
		return count + 1
	case 4:
		return max(count-v, 0)
	}
	return v % (count + 1)
}

// harnessKey keeps one key's counts as a counter table does, per window
// index, and decides its checks with Position and DecideAt.
type harnessKey struct {
	rule *Rule
	idx  int64
	c    Counts
	seen bool
}

// peek is the key's counts for window idx (not before its last check's),
// as the table would roll them, without changing anything.
func (k *harnessKey) peek(idx int64) Counts {
	switch {
	case !k.seen || idx >= k.idx+2:
		return Counts{}
	case idx == k.idx+1:
		return Counts{Prev: k.c.Curr}
	}
	return k.c
}

// at is the key's counts at moment now.
func (k *harnessKey) at(now int64) Counts { return k.peek(Index(now, k.rule.Window)) }

// add records hits at now without deciding them.
func (k *harnessKey) add(now, hits int64) {
	idx := Index(now, k.rule.Window)
	k.c, k.idx, k.seen = k.peek(idx), idx, true
	k.c.Curr += hits
}

// allow decides hits at now and records them if admitted.
func (k *harnessKey) allow(now, hits int64) Decision {
	idx, elapsed := Position(now, k.rule.Window)
	k.c, k.idx, k.seen = k.peek(idx), idx, true
	d := k.rule.DecideAt(k.c, elapsed, hits)
	if d.Allowed && hits > 0 {
		k.c.Curr += hits
	}
	return d
}
