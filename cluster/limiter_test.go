package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// frozenAt is a fake clock that stays at moment at, in Unix nanoseconds,
// until a test moves it.
type frozenAt struct{ ns atomic.Int64 }

func newFrozen(at int64) *frozenAt {
	c := &frozenAt{}
	c.ns.Store(at)
	return c
}

func (c *frozenAt) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *frozenAt) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// minuteStart is the start of a minute, far from zero.
const minuteStart = int64(1_800_000_000) * int64(time.Second)

// startLone starts a lone node with rules on clock now (nil: the wall
// clock) and closes it when the test ends.
func startLone(t *testing.T, now func() time.Time, rules ...window.Rule) *Node {
	t.Helper()
	nd, err := Start(context.Background(), Config{Name: "lone", Rules: rules, Logger: testLogger(t), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}

func fixedRule(name string, count int64, w time.Duration) window.Rule {
	return window.Rule{Name: name, Count: count, Window: w, Type: window.Fixed}
}

// TestLimiterUnknownRule checks that a handle on a rule the node lacks,
// or on a closed node, is refused when it is asked for.
func TestLimiterUnknownRule(t *testing.T) {
	nd := startLone(t, nil, fixedRule("api", 5, time.Minute))
	if _, err := nd.Limiter("apj"); !errors.Is(err, ErrUnknownRule) {
		t.Fatalf(`Limiter("apj") = %v, want ErrUnknownRule`, err)
	}
	lim, err := nd.Limiter("api")
	if err != nil {
		t.Fatal(err)
	}
	if lim.Name() != "api" {
		t.Fatalf("Name() = %q", lim.Name())
	}
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := nd.Limiter("api"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Limiter on a closed node = %v, want ErrClosed", err)
	}
}

// TestLimiterFollowsReload checks that a handle decides by the rule as the
// node has it after a Reload, fails with ErrUnknownRule while a Reload has
// removed the rule, and works again once one brings it back.
func TestLimiterFollowsReload(t *testing.T) {
	ctx := context.Background()
	clock := newFrozen(minuteStart + 10*int64(time.Second))
	nd := startLone(t, clock.Now, fixedRule("api", 2, time.Minute), fixedRule("other", 1, time.Minute))
	lim, err := nd.Limiter("api")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name    string
		rules   []window.Rule
		hits    int64
		want    bool
		wantErr error
		limit   int64
	}{
		{"as started", nil, 2, true, nil, 2},
		{"count raised", []window.Rule{fixedRule("api", 5, time.Minute)}, 3, true, nil, 5},
		{"window full", nil, 1, false, nil, 5},
		{"rule removed", []window.Rule{fixedRule("other", 1, time.Minute)}, 1, false, ErrUnknownRule, 0},
		{"rule back, new window length", []window.Rule{fixedRule("api", 5, time.Hour)}, 5, true, nil, 5},
	} {
		if step.rules != nil {
			if err := nd.Reload(ctx, step.rules); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
		}
		d, err := lim.AllowN(ctx, "k", step.hits)
		if !errors.Is(err, step.wantErr) || d.Allowed != step.want || d.Limit != step.limit {
			t.Fatalf("%s: %d hits: %+v, %v; want allowed=%v limit %d, error %v", step.name, step.hits, d, err, step.want, step.limit, step.wantErr)
		}
		r, ok := lim.Rule()
		if ok != (step.wantErr == nil) || ok && r.Count != step.limit {
			t.Fatalf("%s: Rule() = %+v, %v", step.name, r, ok)
		}
	}
}

// TestLimiterHonoursCloseAndContext checks that a handle's checks decide
// nothing for a context that has ended, and fail with ErrClosed once the
// node is closed, for batched rules of every allocation.
func TestLimiterHonoursCloseAndContext(t *testing.T) {
	rules := []window.Rule{
		{Name: "owner", Count: 10, Window: time.Minute},
		{Name: "adaptive", Count: 10, Window: time.Minute, Allocation: window.Adaptive},
		{Name: "classic", Count: 10, Window: time.Minute, Allocation: window.Classic},
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	nd := startLone(t, nil, rules...)
	calls := map[string]func(ctx context.Context, l *Limiter) error{
		"Allow": func(ctx context.Context, l *Limiter) error { _, err := l.Allow(ctx, "k"); return err },
		"AllowN": func(ctx context.Context, l *Limiter) error {
			_, err := l.AllowN(ctx, "k", 2)
			return err
		},
		"Wait": func(ctx context.Context, l *Limiter) error { return l.Wait(ctx, "k", 1) },
		"Reserve": func(ctx context.Context, l *Limiter) error {
			_, err := l.Reserve(ctx, "k", 1)
			return err
		},
	}
	lims := map[string]*Limiter{}
	for _, r := range rules {
		lim, err := nd.Limiter(r.Name)
		if err != nil {
			t.Fatal(err)
		}
		lims[r.Name] = lim
		for name, call := range calls {
			if err := call(cancelled, lim); !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %s with a cancelled context = %v, want context.Canceled", r.Name, name, err)
			}
		}
		if d, err := lim.AllowN(context.Background(), "k", 0); err != nil || d.Remaining != r.Count {
			t.Errorf("%s: %+v, %v after cancelled calls; want all %d left", r.Name, d, err, r.Count)
		}
	}
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		for name, call := range calls {
			if err := call(context.Background(), lims[r.Name]); !errors.Is(err, ErrClosed) {
				t.Errorf("%s: %s on a closed node = %v, want ErrClosed", r.Name, name, err)
			}
		}
	}
}

// TestWait checks when Wait returns and what it spends.
func TestWait(t *testing.T) {
	ctx := context.Background()
	t.Run("hits over the count fail at once", func(t *testing.T) {
		nd := startLone(t, newFrozen(minuteStart).Now, fixedRule("api", 3, time.Minute))
		lim, _ := nd.Limiter("api")
		if err := lim.Wait(ctx, "k", 4); !errors.Is(err, ErrHitsOverCount) {
			t.Fatalf("Wait(4) of a count of 3 = %v, want ErrHitsOverCount", err)
		}
	})
	t.Run("room admits at once", func(t *testing.T) {
		nd := startLone(t, newFrozen(minuteStart).Now, fixedRule("api", 3, time.Minute))
		lim, _ := nd.Limiter("api")
		if err := lim.Wait(ctx, "k", 3); err != nil {
			t.Fatal(err)
		}
		if d, _ := lim.AllowN(ctx, "k", 0); d.Remaining != 0 {
			t.Fatalf("after Wait(3) %d left, want 0", d.Remaining)
		}
	})
	t.Run("a deadline before the room fails at once", func(t *testing.T) {
		nd := startLone(t, newFrozen(minuteStart+10*int64(time.Second)).Now, fixedRule("api", 1, time.Minute))
		lim, _ := nd.Limiter("api")
		if err := lim.Wait(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		// The room comes in 50 s, on a clock that does not move; the
		// deadline is 10 s away.
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := lim.Wait(dctx, "k", 1); !errors.Is(err, context.DeadlineExceeded) || dctx.Err() != nil {
			t.Fatalf("Wait with a deadline before the room = %v (context %v), want DeadlineExceeded at once", err, dctx.Err())
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		nd := startLone(t, newFrozen(minuteStart+10*int64(time.Second)).Now, fixedRule("api", 2, time.Minute))
		lim, _ := nd.Limiter("api")
		if _, err := lim.AllowN(ctx, "k", 2); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- lim.Wait(cctx, "k", 1) }()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait cancelled = %v, want context.Canceled", err)
		}
	})
	t.Run("node closed while waiting", func(t *testing.T) {
		nd := startLone(t, newFrozen(minuteStart+10*int64(time.Second)).Now, fixedRule("api", 1, time.Minute))
		lim, _ := nd.Limiter("api")
		if _, err := lim.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- lim.Wait(ctx, "k", 1) }()
		if err := nd.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait on a closing node = %v, want ErrClosed", err)
		}
	})
	t.Run("waits for the room", func(t *testing.T) {
		// A wall-speed clock that starts on a boundary of 200 ms windows:
		// both checks fall in the first, the wait ends in the second.
		w := 200 * time.Millisecond
		clock := sharedClock(w)
		nd := startLone(t, clockOf(clock), fixedRule("api", 1, w))
		lim, _ := nd.Limiter("api")
		if d, err := lim.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("first check: %+v, %v", d, err)
		}
		first := window.Index(clock(), w)
		if err := lim.Wait(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		if now := window.Index(clock(), w); now <= first {
			t.Fatalf("Wait returned in window %d, the window whose room was spent", now)
		}
	})
}

// TestReserveCancel checks what a reservation's Cancel gives back, on a
// lone node: the hits, within the window, once.
func TestReserveCancel(t *testing.T) {
	ctx := context.Background()
	sliding := window.Rule{Name: "api", Count: 3, Window: time.Minute}
	for _, tc := range []struct {
		name     string
		rule     window.Rule
		hits     int64
		advance  time.Duration // before Cancel
		wantOK   bool
		wantBack bool
		left     int64 // after Cancel
	}{
		{"fixed", fixedRule("api", 3, time.Minute), 2, 30 * time.Second, true, true, 3},
		{"fixed, next window", fixedRule("api", 3, time.Minute), 2, 50 * time.Second, true, false, 3},
		{"sliding", sliding, 2, 30 * time.Second, true, true, 3},
		{"sliding, next window", sliding, 2, 80 * time.Second, true, true, 3},
		{"sliding, two windows on", sliding, 2, 2 * time.Minute, true, false, 3},
		{"refused", fixedRule("api", 3, time.Minute), 3, 0, false, false, 2},
		{"0 hits", fixedRule("api", 3, time.Minute), 0, 0, true, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFrozen(minuteStart + 10*int64(time.Second))
			nd := startLone(t, clock.Now, tc.rule)
			lim, _ := nd.Limiter("api")
			if tc.name == "refused" || tc.name == "0 hits" {
				if _, err := lim.AllowN(ctx, "k", 1); err != nil {
					t.Fatal(err)
				}
			}
			r, err := lim.Reserve(ctx, "k", tc.hits)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() != tc.wantOK || r.Decision().Allowed != tc.wantOK {
				t.Fatalf("reservation OK=%v, want %v", r.OK(), tc.wantOK)
			}
			clock.Advance(tc.advance)
			if got := r.Cancel(); got != tc.wantBack {
				t.Fatalf("Cancel() = %v, want %v", got, tc.wantBack)
			}
			if r.Cancel() {
				t.Fatal("a second Cancel gave the hits back again")
			}
			d, err := lim.AllowN(ctx, "k", 0)
			if err != nil || d.Remaining != tc.left {
				t.Fatalf("after Cancel: %d left (%v), want %d", d.Remaining, err, tc.left)
			}
		})
	}
}

// TestCancelOnce checks that of many concurrent Cancels of one
// reservation exactly one gives its hits back.
func TestCancelOnce(t *testing.T) {
	ctx := context.Background()
	nd := startLone(t, newFrozen(minuteStart).Now, fixedRule("api", 10, time.Minute))
	lim, _ := nd.Limiter("api")
	if _, err := lim.AllowN(ctx, "k", 4); err != nil {
		t.Fatal(err)
	}
	r, err := lim.Reserve(ctx, "k", 3)
	if err != nil || !r.OK() {
		t.Fatalf("%v, %v", r, err)
	}
	var back atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if r.Cancel() {
				back.Add(1)
			}
		})
	}
	wg.Wait()
	if back.Load() != 1 {
		t.Fatalf("%d Cancels gave the hits back, want 1", back.Load())
	}
	if d, _ := lim.AllowN(ctx, "k", 0); d.Remaining != 6 {
		t.Fatalf("%d left, want the 6 the other check left", d.Remaining)
	}
}

// TestCancelAfterClose checks that Cancel on a closing node gives nothing
// back.
func TestCancelAfterClose(t *testing.T) {
	nd := startLone(t, newFrozen(minuteStart).Now, fixedRule("api", 10, time.Minute))
	lim, _ := nd.Limiter("api")
	r, err := lim.Reserve(context.Background(), "k", 1)
	if err != nil || !r.OK() {
		t.Fatalf("%v, %v", r, err)
	}
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Cancel() {
		t.Fatal("Cancel on a closed node reported the hits given back")
	}
}

// TestDecisionTimes checks At and RetryAt against the node's clock.
func TestDecisionTimes(t *testing.T) {
	ctx := context.Background()
	at := minuteStart + 10*int64(time.Second)
	nd := startLone(t, newFrozen(at).Now, fixedRule("api", 1, time.Minute))
	lim, _ := nd.Limiter("api")
	admitted, err := lim.Allow(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	refused, err := lim.Allow(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Unix(0, at)
	for _, tc := range []struct {
		name        string
		d           Decision
		at, retryAt time.Time
		retryAfter  time.Duration
	}{
		{"admitted", admitted, want, want, 0},
		{"refused", refused, want, want.Add(50 * time.Second), 50 * time.Second},
		{"zero", Decision{}, time.Time{}, time.Time{}, 0},
	} {
		if !tc.d.At().Equal(tc.at) || !tc.d.RetryAt().Equal(tc.retryAt) || tc.d.RetryAfter != tc.retryAfter {
			t.Errorf("%s: At %v, RetryAt %v, RetryAfter %v; want %v, %v, %v", tc.name,
				tc.d.At(), tc.d.RetryAt(), tc.d.RetryAfter, tc.at, tc.retryAt, tc.retryAfter)
		}
	}
}

// TestCancelInAFleet checks, on two nodes sharing an owner-allocated rule,
// that hits a node gives back are its own to admit again, and that the
// fleet admits no more than the count in all.
func TestCancelInAFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster")
	}
	ctx := context.Background()
	rule := fixedRule("api", 4, time.Hour)
	nodes := startCluster(t, 2, []window.Rule{rule}, sharedClock(time.Hour))
	lims := make([]*Limiter, len(nodes))
	for i, nd := range nodes {
		lim, err := nd.Limiter("api")
		if err != nil {
			t.Fatal(err)
		}
		lims[i] = lim
	}
	var held []*Reservation
	for i := range lims {
		r, err := lims[i].Reserve(ctx, "k", 2)
		if err != nil || !r.OK() {
			t.Fatalf("node %d reserving 2 of 4: %+v, %v", i, r.Decision(), err)
		}
		held = append(held, r)
	}
	if !held[0].Cancel() {
		t.Fatal("node 0 could not give its 2 hits back")
	}
	if own, _, err := nodes[0].View("api", "k"); err != nil || own.Curr != 0 {
		t.Fatalf("node 0 counts %d of its own after Cancel (%v), want 0", own.Curr, err)
	}
	if d, err := lims[0].AllowN(ctx, "k", 2); err != nil || !d.Allowed {
		t.Fatalf("node 0 admitting the 2 it gave back: %+v, %v", d, err)
	}
	for i := range 6 {
		if d, err := lims[i%2].Allow(ctx, "k"); err != nil || d.Allowed {
			t.Fatalf("check %d on node %d with the count spent: %+v, %v; want a refusal", i, i%2, d, err)
		}
	}
}
