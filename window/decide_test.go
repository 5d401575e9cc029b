package window

import (
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// key is a reference single-key store for tests: it rolls its counts as
// time passes and records admitted hits.
type key struct {
	rule *Rule
	idx  int64
	c    Counts
	seen bool
}

func (k *key) at(now int64) Counts {
	idx := Index(now, k.rule.Window)
	switch {
	case !k.seen || idx >= k.idx+2:
		return Counts{}
	case idx == k.idx+1:
		return Counts{Prev: k.c.Curr}
	case idx == k.idx:
		return k.c
	}
	panic("time went backwards in a test")
}

func (k *key) allow(now, hits int64) Decision {
	k.c = k.at(now)
	k.idx, k.seen = Index(now, k.rule.Window), true
	d := k.rule.Decide(k.c, now, hits)
	if d.Allowed {
		k.c.Curr += hits
	}
	return d
}

const sec = int64(time.Second)

// base is an arbitrary epoch-aligned moment for 1 s and 10 s windows.
const base = 1_800_000_000 * sec

func TestDecideFixedStraddle(t *testing.T) {
	r := &Rule{Name: "api", Count: 100, Window: time.Second, Type: Fixed, SyncInterval: Strict}
	k := &key{rule: r}
	// 100 requests in the last 10 ms before a boundary, 100 in the first 10 ms after.
	admitted := 0
	for i := range 100 {
		if k.allow(base+sec-10_000_000+int64(i)*100_000, 1).Allowed {
			admitted++
		}
	}
	for i := range 100 {
		if k.allow(base+sec+int64(i)*100_000, 1).Allowed {
			admitted++
		}
	}
	if admitted != 200 {
		t.Fatalf("fixed window straddling a boundary admitted %d in 20ms, want 200 (2 × count)", admitted)
	}
}

func TestDecideSlidingStraddle(t *testing.T) {
	tests := []struct {
		name      string
		overlap   float64 // fraction of the previous window still counted at the second burst
		wantAdmit int
	}{
		// The first burst ends just before the boundary; the second arrives when
		// (1 − elapsed/window) of it still counts: count × elapsed/window fit.
		{"at boundary", 1.0, 0},
		{"quarter in", 0.75, 25},
		{"half in", 0.5, 50},
		{"nine tenths in", 0.1, 90},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Rule{Name: "api", Count: 100, Window: time.Second, Type: Sliding, SyncInterval: Strict}
			k := &key{rule: r}
			first := 0
			for i := range 100 {
				if k.allow(base+sec-1_000_000+int64(i), 1).Allowed {
					first++
				}
			}
			if first != 100 {
				t.Fatalf("first burst admitted %d, want 100", first)
			}
			at := base + sec + int64((1-tt.overlap)*float64(sec))
			second := 0
			for range 100 {
				if k.allow(at, 1).Allowed {
					second++
				}
			}
			if second != tt.wantAdmit {
				t.Errorf("second burst admitted %d, want %d", second, tt.wantAdmit)
			}
		})
	}
}

func TestDecideTable(t *testing.T) {
	sliding := &Rule{Name: "s", Count: 10, Window: 10 * time.Second, Type: Sliding, SyncInterval: Strict}
	fixed := &Rule{Name: "f", Count: 10, Window: 10 * time.Second, Type: Fixed, SyncInterval: Strict}
	tests := []struct {
		name string
		rule *Rule
		c    Counts
		at   int64 // offset into the window
		hits int64
		want Decision
	}{
		{"fixed empty", fixed, Counts{}, 2 * sec, 1,
			Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 8 * time.Second}},
		{"fixed last", fixed, Counts{Curr: 9}, 2 * sec, 1,
			Decision{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 8 * time.Second}},
		{"fixed full", fixed, Counts{Prev: 3, Curr: 10}, 2 * sec, 1,
			Decision{Allowed: false, Limit: 10, Remaining: 0, ResetAfter: 8 * time.Second, RetryAfter: 8 * time.Second}},
		{"fixed peek", fixed, Counts{Curr: 4}, 2 * sec, 0,
			Decision{Allowed: true, Limit: 10, Remaining: 6, ResetAfter: 8 * time.Second}},
		{"fixed too many hits", fixed, Counts{}, 2 * sec, 11,
			Decision{Allowed: false, Limit: 10, Remaining: 10}},
		{"sliding prev only", sliding, Counts{Prev: 10}, 5 * sec, 1,
			// estimate 5 → admit, remaining floor(10 − 6) = 4; prev decays in 5 s, curr in 15 s.
			Decision{Allowed: true, Limit: 10, Remaining: 4, ResetAfter: 15 * time.Second}},
		{"sliding refused, retry in window", sliding, Counts{Prev: 10, Curr: 5}, 2 * sec, 1,
			// estimate 8 + 5 = 13; need 10 − 1 − 5 = 4 of prev left: 10 × (1 − e/10) ≤ 4 ⇔ e ≥ 6 s.
			Decision{Allowed: false, Limit: 10, Remaining: 0, ResetAfter: 18 * time.Second, RetryAfter: 4 * time.Second}},
		{"sliding refused, retry after boundary", sliding, Counts{Prev: 4, Curr: 10}, 5 * sec, 1,
			// curr alone is full: after the boundary, 10 × (1 − e/10) + 1 ≤ 10 ⇔ e ≥ 1 s.
			Decision{Allowed: false, Limit: 10, Remaining: 0, ResetAfter: 15 * time.Second, RetryAfter: 6 * time.Second}},
		{"sliding peek over", sliding, Counts{Prev: 10, Curr: 10}, 0, 0,
			Decision{Allowed: false, Limit: 10, Remaining: 0, ResetAfter: 20 * time.Second, RetryAfter: 11 * time.Second}},
		{"sliding empty", sliding, Counts{}, 0, 3,
			Decision{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 20 * time.Second}},
		{"sliding nothing held", sliding, Counts{}, 0, 0,
			Decision{Allowed: true, Limit: 10, Remaining: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := 100*sec + tt.at
			got := tt.rule.Decide(tt.c, now, tt.hits)
			tt.want.At = now // a decision says when it was made
			if got != tt.want {
				t.Errorf("Decide(%+v, +%v, %d) =\n %+v, want\n %+v", tt.c, time.Duration(tt.at), tt.hits, got, tt.want)
			}
		})
	}
}

// estimateRat is the sliding estimate prev × (1 − e/w) + curr, exactly.
func estimateRat(r *Rule, c Counts, now int64) *big.Rat {
	e := int64(Elapsed(now, r.Window))
	est := big.NewRat(c.Prev*(int64(r.Window)-e), int64(r.Window))
	if r.Type == Fixed {
		est.SetInt64(0)
	}
	return est.Add(est, big.NewRat(c.Curr, 1))
}

func genRule(t *rapid.T, typ Type) *Rule {
	return &Rule{
		Name:         "p",
		Count:        rapid.Int64Range(1, 1000).Draw(t, "count"),
		Window:       time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Hour)).Draw(t, "window")),
		Type:         typ,
		SyncInterval: Strict,
	}
}

// step draws the gap to the next request: mostly short, sometimes across
// one or more windows.
func step(t *rapid.T, r *Rule, label string) int64 {
	w := int64(r.Window)
	return rapid.OneOf(
		rapid.Int64Range(0, w/50+1),
		rapid.Int64Range(0, 3*w),
	).Draw(t, label)
}

func TestPropertyFixedNeverExceedsCount(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRule(t, Fixed)
		k := &key{rule: r}
		perWindow := map[int64]int64{}
		now := rapid.Int64Range(0, 1<<50).Draw(t, "start")
		for i := range rapid.IntRange(1, 300).Draw(t, "n") {
			now += step(t, r, "gap")
			hits := rapid.Int64Range(0, r.Count+1).Draw(t, "hits")
			if k.allow(now, hits).Allowed {
				perWindow[Index(now, r.Window)] += hits
			}
			if got := perWindow[Index(now, r.Window)]; got > r.Count {
				t.Fatalf("request %d: window %d admitted %d > count %d", i, Index(now, r.Window), got, r.Count)
			}
		}
	})
}

func TestPropertySlidingEstimateBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRule(t, Sliding)
		k := &key{rule: r}
		now := rapid.Int64Range(0, 1<<50).Draw(t, "start")
		limit := big.NewRat(r.Count, 1)
		for range rapid.IntRange(1, 300).Draw(t, "n") {
			now += step(t, r, "gap")
			hits := rapid.Int64Range(0, r.Count+1).Draw(t, "hits")
			d := k.allow(now, hits)
			est := estimateRat(r, k.c, now)
			if d.Allowed && est.Cmp(limit) > 0 {
				t.Fatalf("after admitting %d at %d the estimate is %s > count %d", hits, now, est.FloatString(3), r.Count)
			}
			// Remaining is floor(count − estimate).
			left := new(big.Rat).Sub(limit, est)
			floor := new(big.Int).Quo(left.Num(), left.Denom())
			if left.Sign() < 0 {
				floor.SetInt64(0)
			}
			if d.Remaining != floor.Int64() {
				t.Fatalf("Remaining = %d, want floor(%s) = %d", d.Remaining, left.FloatString(3), floor.Int64())
			}
		}
	})
}

// TestPropertyHonestRetryAfter: a refused client that returns after exactly
// RetryAfter, with no other traffic, is admitted; one that returns a
// nanosecond (or a millisecond) earlier is not.
func TestPropertyHonestRetryAfter(t *testing.T) {
	for _, typ := range []Type{Sliding, Fixed} {
		t.Run(typ.String(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				r := genRule(t, typ)
				k := &key{rule: r, seen: true}
				now := rapid.Int64Range(0, 1<<50).Draw(t, "now")
				k.idx = Index(now, r.Window)
				k.c = Counts{
					Prev: rapid.Int64Range(0, 2*r.Count).Draw(t, "prev"),
					Curr: rapid.Int64Range(0, 2*r.Count).Draw(t, "curr"),
				}
				hits := rapid.Int64Range(1, r.Count).Draw(t, "hits")
				d := r.Decide(k.c, now, hits)
				if d.Allowed {
					return
				}
				if d.RetryAfter <= 0 {
					t.Fatalf("refused with RetryAfter %v", d.RetryAfter)
				}
				back := now + int64(d.RetryAfter)
				if !r.Fits(k.at(back), back, hits) {
					t.Fatalf("counts %+v at +%v: retry after %v is refused", k.c, Elapsed(now, r.Window), d.RetryAfter)
				}
				for _, early := range []int64{1, int64(time.Millisecond)} {
					if early > int64(d.RetryAfter) {
						continue
					}
					if r.Fits(k.at(back-early), back-early, hits) {
						t.Fatalf("counts %+v at +%v: retry %v before RetryAfter %v is admitted",
							k.c, Elapsed(now, r.Window), time.Duration(early), d.RetryAfter)
					}
				}
			})
		})
	}
}

func TestDecideLargeValuesDoNotOverflow(t *testing.T) {
	r := &Rule{Name: "big", Count: MaxCount, Window: 24 * time.Hour, Type: Sliding, SyncInterval: Strict}
	now := base + int64(time.Hour)
	d := r.Decide(Counts{Prev: MaxCount, Curr: MaxCount / 2}, now, 1)
	if d.Allowed {
		t.Fatalf("Decide admitted with estimate above count: %+v", d)
	}
	back := now + int64(d.RetryAfter)
	k := &key{rule: r, idx: Index(now, r.Window), c: Counts{Prev: MaxCount, Curr: MaxCount / 2}, seen: true}
	if !r.Fits(k.at(back), back, 1) {
		t.Fatalf("retry after %v refused", d.RetryAfter)
	}
}
