package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// steppedClock is wall time moved by an offset that a test steps forward,
// starting at the beginning of a window of length w.
type steppedClock struct{ offset atomic.Int64 }

func newSteppedClock(w time.Duration) *steppedClock {
	c := &steppedClock{}
	now := time.Now().UnixNano()
	c.offset.Store(window.Start(window.Index(now, w)+1, w) - now)
	return c
}

func (c *steppedClock) now() int64           { return time.Now().UnixNano() + c.offset.Load() }
func (c *steppedClock) step(d time.Duration) { c.offset.Add(int64(d)) }

// TestOwnedRetryAfterAndRemaining checks what a refused client is told on a
// 3-node fleet with a small count: every node admits while the fleet has
// room, whichever node served the earlier hits; Remaining is what the fleet
// has left; a refusal's RetryAfter is when the fleet has room again, and a
// retry then is admitted.
func TestOwnedRetryAfterAndRemaining(t *testing.T) {
	for _, typ := range []window.Type{window.Fixed, window.Sliding} {
		t.Run(typ.String(), func(t *testing.T) {
			rule := window.Rule{Name: "login", Count: 10, Window: time.Minute, Type: typ,
				SyncInterval: 100 * time.Millisecond, Allocation: window.Owner}
			clk := newSteppedClock(rule.Window)
			clk.step(time.Second)
			// What a client is told does not depend on how soon an owner
			// answers: a slow answer (a loaded machine) is waited for.
			nodes := startCluster(t, 3, []window.Rule{rule}, clk.now, func(c *Config) { c.BorrowTimeout = 5 * time.Second })
			ctx := context.Background()
			for i := range 10 {
				nd := nodes[i%3]
				d, err := nd.Allow(ctx, "login", "alice", 1)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					t.Fatalf("hit %d on %s refused with %d admitted of 10: %+v (borrow timeouts %d)", i+1, nd.cfg.Name, i, d, nd.metrics.BorrowTimeouts.Load())
				}
				if d.Remaining != int64(9-i) {
					t.Errorf("hit %d on %s: remaining %d, want the fleet's %d", i+1, nd.cfg.Name, d.Remaining, 9-i)
				}
			}
			// Each node in turn: refused while the fleet is full, told when
			// it has room, and admitted when it retries then. In a fixed
			// window the first wait frees the whole count; in a sliding one
			// each wait frees one hit.
			for _, nd := range nodes {
				d, err := nd.Allow(ctx, "login", "alice", 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					if typ == window.Sliding {
						t.Fatalf("%s: %+v in a full sliding window", nd.cfg.Name, d)
					}
					continue
				}
				if d.Remaining != 0 || d.RetryAfter <= rule.SyncInterval {
					t.Fatalf("%s: %+v with the fleet's 10 spent, want nothing remaining and the wait until a hit frees", nd.cfg.Name, d)
				}
				clk.step(d.RetryAfter)
				if d, err = nd.Allow(ctx, "login", "alice", 1); err != nil {
					t.Fatal(err)
				} else if !d.Allowed {
					t.Errorf("%s: retry at the RetryAfter given refused: %+v (borrow timeouts %d)", nd.cfg.Name, d, nd.metrics.BorrowTimeouts.Load())
				}
			}
		})
	}
}

// TestOwnedOwnerKilledRefusalIsHonest kills a node with kill -9 semantics
// and checks, on a node that asks the keys it owned before membership
// notices, what a refused client is told: no Remaining the node cannot
// vouch for (the room its view shows may be the silent owner's to give),
// and a RetryAfter after which a retry is admitted while the fleet has
// room, not a sync interval after which it would wait on the same owner
// and be refused again.
func TestOwnedOwnerKilledRefusalIsHonest(t *testing.T) {
	rule := window.Rule{Name: "login", Count: 10, Window: time.Minute, Type: window.Fixed,
		SyncInterval: 100 * time.Millisecond, Allocation: window.Owner}
	clk := newSteppedClock(rule.Window)
	clk.step(time.Second)
	nodes := startCluster(t, 3, []window.Rule{rule}, clk.now)
	ctx := context.Background()
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprint("user-", i)
		// 8 of 10 spent, by the node to be killed and another one.
		for j := range 8 {
			if d, err := nodes[2*(j%2)].Allow(ctx, "login", keys[i], 1); err != nil || !d.Allowed {
				t.Fatalf("hit %d on %s: %+v, %v", j+1, keys[i], d, err)
			}
		}
	}
	nodes[0].Kill()
	asker := nodes[1]
	before := asker.Metrics().BorrowTimeouts
	refused := 0
	for _, key := range keys {
		d, err := asker.Allow(ctx, "login", key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			continue
		}
		refused++
		if d.Remaining >= 1 || d.RetryAfter <= rule.SyncInterval {
			t.Fatalf("%s refused with its owner silent: %+v; want nothing remaining it cannot vouch for and a wait past a sync interval", key, d)
		}
		clk.step(d.RetryAfter)
		if d, err = asker.Allow(ctx, "login", key, 1); err != nil {
			t.Fatal(err)
		} else if !d.Allowed {
			t.Errorf("%s: retry at the RetryAfter given refused with 2 of 10 left: %+v", key, d)
		}
	}
	if asker.Metrics().BorrowTimeouts == before || refused == 0 {
		t.Fatalf("no check waited on the killed owner (%d borrow timeouts, %d refused): membership noticed the kill first",
			asker.Metrics().BorrowTimeouts-before, refused)
	}
	t.Logf("%d of %d keys refused while their owner was silent", refused, len(keys))
}
