package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// keysOf returns what n holds and evicted of the limit named part.
func keysOf(t *testing.T, n *Node, part string) PartKeys {
	t.Helper()
	for _, st := range n.RuleStats() {
		for _, k := range st.Keys {
			if k.Name == part {
				return k
			}
		}
	}
	t.Fatalf("RuleStats has no limit %q", part)
	return PartKeys{}
}

// TestMaxKeysNode: Config.MaxKeys bounds a node's keys, the limits of a
// rule with several together, and RuleStats counts what was evicted.
func TestMaxKeysNode(t *testing.T) {
	rules := []window.Rule{
		{Name: "api", Count: 5, Window: time.Hour, Type: window.Fixed},
		{Name: "multi", Count: 5, Window: time.Hour, Type: window.Fixed,
			Also: []window.Limit{{Count: 10, Window: 2 * time.Hour, Type: window.Fixed}}},
	}
	tests := []struct {
		name     string
		max      int
		api      int // keys checked under api, then as many under multi
		wantMax  int // Config.MaxKeys once started
		wantHeld int // keys held, all limits together
	}{
		{"default", 0, 300, DefaultMaxKeys, 900},
		{"no bound", -1, 300, -1, 900},
		{"a bound", 200, 300, 200, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Start(context.Background(), Config{Rules: rules, MaxKeys: tt.max, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			if n.cfg.MaxKeys != tt.wantMax {
				t.Fatalf("MaxKeys %d once started, want %d", n.cfg.MaxKeys, tt.wantMax)
			}
			ctx := context.Background()
			for i := range tt.api {
				for _, r := range []string{"api", "multi"} {
					if d, err := n.Allow(ctx, r, "k"+strconv.Itoa(i), 1); err != nil || !d.Allowed {
						t.Fatalf("check %d of %s: %+v, %v", i, r, d, err)
					}
				}
			}
			held, evicted := 0, uint64(0)
			for _, part := range []string{"api", "multi", "multi#2"} {
				k := keysOf(t, n, part)
				held += k.Keys
				evicted += k.Evicted
			}
			made := 3 * tt.api // a check under multi makes a key in each of its limits
			if held != min(tt.wantHeld, made) || int(evicted) != made-held {
				t.Fatalf("holds %d keys and evicted %d; want %d held, the rest of %d evicted", held, evicted, tt.wantHeld, made)
			}
		})
	}
}

// TestMaxKeysFromPeers: the keys a node learns of from its peers' deltas
// count against its bound: a peer flooding keys cannot grow it past it.
func TestMaxKeysFromPeers(t *testing.T) {
	// Adaptive allocation: every node sends every peer its counts of
	// every key.
	rules := []window.Rule{{Name: "api", Count: 100, Window: time.Hour, Type: window.Fixed,
		SyncInterval: 50 * time.Millisecond, Allocation: window.Adaptive}}
	flooder := startMemberClock(t, "node-0", rules, nil, "", nil)
	const max, keys = 50, 500
	bounded, err := Start(context.Background(), Config{
		Name: "node-1", Rules: rules, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", Join: []string{flooder.GossipAddr()},
		JoinTimeout: 5 * time.Second, ShutdownTimeout: time.Second, Logger: testLogger(t), MaxKeys: max,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bounded.Close() })
	waitFor(t, patience, "the nodes see each other", func() bool {
		return flooder.metrics.Peers.Load() == 1 && bounded.metrics.Peers.Load() == 1
	})
	ctx := context.Background()
	for i := range keys {
		if _, err := flooder.Allow(ctx, "api", "flood:"+strconv.Itoa(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, patience, "the bounded node to hear of every key", func() bool {
		k := keysOf(t, bounded, "api")
		if k.Keys > max {
			t.Fatalf("the bounded node holds %d keys, over its bound of %d", k.Keys, max)
		}
		return k.Evicted >= keys-max
	})
	if k := keysOf(t, flooder, "api"); k.Keys != keys || k.Evicted != 0 {
		t.Fatalf("the flooding node holds %d keys and evicted %d, want %d and 0", k.Keys, k.Evicted, keys)
	}
}
