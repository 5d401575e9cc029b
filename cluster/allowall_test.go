package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestAllowAllIsAllOrNothing checks a burst cap and a longer limit decided
// together on a lone node: a check is admitted only if both admit it, and
// a refusal by either spends nothing on the other.
func TestAllowAllIsAllOrNothing(t *testing.T) {
	clk := &frozenAt{}
	clk.ns.Store(minuteStart + int64(30*time.Second))
	burst := fixedRule("burst", 2, time.Second)
	long := window.Rule{Name: "long", Count: 5, Window: time.Minute, Type: window.Sliding}
	nd := startLone(t, clk.Now, burst, long)
	ctx := context.Background()
	both := func(key string, hits int64) []Check {
		return []Check{{Rule: "burst", Key: key, Hits: hits}, {Rule: "long", Key: key, Hits: hits}}
	}
	own := func(rule, key string) int64 {
		o, _, err := nd.View(rule, key)
		if err != nil {
			t.Fatal(err)
		}
		return o.Curr
	}
	steps := []struct {
		name      string
		checks    []Check
		advance   time.Duration // before the check
		ok        bool
		burst     int64 // own counts after it
		long      int64
		refusedBy int // index of the refusing part, -1 for none
	}{
		{"both fit", both("u", 1), 0, true, 1, 1, -1},
		{"both fit again", both("u", 1), 0, true, 2, 2, -1},
		{"burst full: the long limit spends nothing", both("u", 1), 0, false, 2, 2, 0},
		{"next second", both("u", 2), time.Second, true, 2, 4, -1},
		{"long limit refuses 2: the burst cap gives its 2 back", both("u", 2), time.Second, false, 0, 4, 1},
		{"one more fits", both("u", 1), 0, true, 1, 5, -1},
		{"another key is its own", both("v", 2), 0, true, 2, 2, -1},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		ds, ok, err := nd.AllowAll(ctx, s.checks)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		key := s.checks[0].Key
		if ok != s.ok || own("burst", key) != s.burst || own("long", key) != s.long {
			t.Fatalf("%s: ok %v, own counts burst %d long %d; want %v, %d, %d (decisions %+v)",
				s.name, ok, own("burst", key), own("long", key), s.ok, s.burst, s.long, ds)
		}
		for i, d := range ds {
			if refused := !d.Allowed; refused != (i == s.refusedBy) {
				t.Fatalf("%s: part %d decided %+v; want the refusal from part %d", s.name, i, d, s.refusedBy)
			}
		}
	}
}

// TestAllowAllErrorsSpendNothing checks that a part that could never be
// decided fails the whole check before anything is spent, naming the part.
func TestAllowAllErrorsSpendNothing(t *testing.T) {
	nd := startLone(t, nil, fixedRule("a", 5, time.Minute), fixedRule("b", 5, time.Minute))
	for _, tc := range []struct {
		name   string
		checks []Check
		want   error
	}{
		{"unknown rule", []Check{{"a", "k", 1}, {"nope", "k", 1}}, ErrUnknownRule},
		{"empty key", []Check{{"a", "k", 1}, {"b", "", 1}}, ErrEmptyKey},
		{"hits over the count", []Check{{"a", "k", 1}, {"b", "k", 6}}, ErrHitsOverCount},
		{"negative hits", []Check{{"a", "k", -1}}, ErrNegativeHits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok, err := nd.AllowAll(context.Background(), tc.checks)
			if ok || !errors.Is(err, tc.want) {
				t.Fatalf("got ok %v, %v; want %v", ok, err, tc.want)
			}
			if own, _, _ := nd.View("a", "k"); own.Curr != 0 {
				t.Fatalf("rule a spent %d on a check that failed", own.Curr)
			}
		})
	}
	nd.Close()
	if _, _, err := nd.AllowAll(context.Background(), []Check{{"a", "k", 1}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("on a closed node: %v", err)
	}
}
