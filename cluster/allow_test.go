package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestAllowHonoursCloseAndContext checks that Allow decides nothing, and
// says why, on a node that is closed or for a context that has ended, for
// batched rules of every allocation.
func TestAllowHonoursCloseAndContext(t *testing.T) {
	rules := []window.Rule{
		{Name: "owner", Count: 10, Window: time.Minute, SyncInterval: 100 * time.Millisecond},
		{Name: "adaptive", Count: 10, Window: time.Minute, SyncInterval: 100 * time.Millisecond, Allocation: window.Adaptive},
		{Name: "classic", Count: 10, Window: time.Minute, SyncInterval: 100 * time.Millisecond, Allocation: window.Classic},
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		close bool
		want  error
	}{
		{"cancelled context", cancelled, false, context.Canceled},
		{"expired deadline", expired, false, context.DeadlineExceeded},
		{"closed node", context.Background(), true, ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nd, err := Start(context.Background(), Config{Rules: rules, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer nd.Close()
			if tc.close {
				if err := nd.Close(); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range rules {
				d, err := nd.Allow(tc.ctx, r.Name, "k", 1)
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: Allow returned %v, want %v", r.Name, err, tc.want)
				}
				if d.Allowed {
					t.Errorf("%s: Allow admitted a check it returned %v for", r.Name, err)
				}
			}
			if tc.close {
				return
			}
			// Nothing was counted: a live check sees the whole count left.
			for _, r := range rules {
				d, err := nd.Allow(context.Background(), r.Name, "k", 0)
				if err != nil {
					t.Fatal(err)
				}
				if d.Remaining != r.Count {
					t.Errorf("%s: %d remaining after refused calls, want %d", r.Name, d.Remaining, r.Count)
				}
			}
		})
	}
}

// TestRuleWithoutSyncInterval checks that the zero value of a rule's sync
// interval works on a lone node: the rule is batched at the default, at
// start and on reload, and its count holds.
func TestRuleWithoutSyncInterval(t *testing.T) {
	ctx := context.Background()
	nd, err := Start(ctx, Config{Rules: []window.Rule{{Name: "api", Count: 3, Window: time.Minute}}, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("a rule without a sync interval: %v", err)
	}
	defer nd.Close()
	for i, want := range []bool{true, true, true, false} {
		d, err := nd.Allow(ctx, "api", "user:1", 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("check %d: allowed=%v err=%v, want allowed=%v", i+1, d.Allowed, err, want)
		}
	}
	if err := nd.Reload(ctx, []window.Rule{{Name: "api", Count: 5, Window: time.Minute}}); err != nil {
		t.Fatalf("reload with a rule without a sync interval: %v", err)
	}
	if d, err := nd.Allow(ctx, "api", "user:1", 1); err != nil || !d.Allowed {
		t.Fatalf("after raising the count: allowed=%v err=%v, want admitted", d.Allowed, err)
	}
}
