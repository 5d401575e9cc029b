package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/counter"
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
			// A node whose demand spans two sync intervals is granted what
			// it will ask for during a round trip, and admits that much
			// without asking, on a view that may be a hit behind. A
			// loaded machine spreads the ten hits out and lengthens the
			// round trip: with a sync interval of a second, the hits stay
			// within one or two intervals and every node asks for each.
			rule := window.Rule{Name: "login", Count: 10, Window: time.Minute, Type: typ,
				SyncInterval: time.Second, Allocation: window.Owner}
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
// and a RetryAfter of at least a sync interval: while gossip holds the
// owner alive it may be behind a stalled link and still admitting, so the
// node does not decide from its view, and the first refusal says when it
// could, at the earliest. Once gossip no longer holds the owner alive, a
// retry after the RetryAfter given is admitted while the fleet has room.
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
		// 8 of 10 spent, by the node to be killed and another one. On a
		// loaded machine a node may hold a grant for the other's hits,
		// which it gives back at its next round: a refused hit is tried
		// again at its RetryAfter, as a client would.
		for j := range 8 {
			nd := nodes[2*(j%2)]
			deadline := time.Now().Add(patience)
			for {
				d, err := nd.Allow(ctx, "login", keys[i], 1)
				if err != nil {
					t.Fatalf("hit %d on %s: %v", j+1, keys[i], err)
				}
				if d.Allowed {
					break
				}
				if d.RetryAfter <= 0 || time.Now().After(deadline) {
					t.Fatalf("hit %d on %s: %+v, and its retries refused for %v", j+1, keys[i], d, patience)
				}
				<-time.After(d.RetryAfter)
			}
		}
	}
	nodes[0].Kill()
	asker := nodes[1]
	before := asker.Metrics().BorrowTimeouts
	waits := map[string]time.Duration{}
	first := true
	for _, key := range keys {
		d, err := asker.Allow(ctx, "login", key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			continue
		}
		if d.Remaining >= 1 || d.RetryAfter < rule.SyncInterval {
			t.Fatalf("%s refused with its owner silent: %+v; want nothing remaining it cannot vouch for and a wait of a sync interval or more", key, d)
		}
		if first && d.RetryAfter <= rule.SyncInterval {
			t.Fatalf("%s, the first check to wait on the silent owner, refused with %+v; want the wait until the node may decide without it", key, d)
		}
		first = false
		waits[key] = d.RetryAfter
	}
	if asker.Metrics().BorrowTimeouts == before || len(waits) == 0 {
		t.Fatalf("no check waited on the killed owner (%d borrow timeouts, %d refused): membership noticed the kill first",
			asker.Metrics().BorrowTimeouts-before, len(waits))
	}
	// Every survivor, not only the asker: a key's new owner that still
	// holds the killed node alive keeps room back for it, and refuses
	// within its rights until its own gossip agrees.
	waitFor(t, 30*time.Second, "gossip on every survivor no longer holds the killed node alive", func() bool {
		return !asker.gossipAlive(nodes[0].cfg.Name) && !nodes[2].gossipAlive(nodes[0].cfg.Name)
	})
	for _, key := range keys {
		wait, ok := waits[key]
		if !ok {
			continue
		}
		clk.step(wait)
		if d, err := asker.Allow(ctx, "login", key, 1); err != nil {
			t.Fatal(err)
		} else if !d.Allowed {
			t.Errorf("%s: retry at the RetryAfter given, the owner no longer alive to gossip, refused with 2 of 10 left: %+v", key, d)
		}
	}
	t.Logf("%d of %d keys refused while their owner was silent", len(waits), len(keys))
}

// TestSilentOwnerAliveToGossipIsNotLost checks when a node stops refusing
// beyond its grant the checks on keys whose owner does not answer: not
// while gossip holds the owner alive, however long it has been silent (a
// stalled link; the owner may still be admitting), and once it has been
// silent that long and gossip no longer holds it alive.
func TestSilentOwnerAliveToGossipIsNotLost(t *testing.T) {
	rule := window.Rule{Name: "login", Count: 10, Window: time.Minute, Type: window.Fixed,
		SyncInterval: 100 * time.Millisecond, Allocation: window.Owner}
	clk := newSteppedClock(rule.Window)
	clk.step(time.Second)
	nodes := startCluster(t, 3, []window.Rule{rule}, clk.now)
	asker, owner := nodes[1], nodes[0].self
	asked := clk.now()
	asker.borrows.markSilent(owner, asked)
	if got, lostAt := asker.outcomeFor(owner, asked); got != counter.Late || lostAt != asked+OwnerLostAfter*int64(asker.cfg.BorrowTimeout) {
		t.Fatalf("just silent: outcome %v, lost from %v after the question; want Late, and %d borrow timeouts", got, time.Duration(lostAt-asked), OwnerLostAfter)
	}
	clk.step(time.Minute / 2)
	if got, _ := asker.outcomeFor(owner, asked); got != counter.Late {
		t.Fatalf("silent for 30 s, alive to gossip: outcome %v, want Late", got)
	}
	nodes[0].Kill()
	waitFor(t, 30*time.Second, "gossip no longer holds the killed owner alive", func() bool {
		return !asker.gossipAlive(owner.Node)
	})
	if got, _ := asker.outcomeFor(owner, asked); got != counter.Lost {
		t.Fatalf("silent for 30 s, no longer alive to gossip: outcome %v, want Lost", got)
	}
}
