package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// testLogger keeps test output quiet unless SLUICE_TEST_LOG is set.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startCluster starts n nodes on loopback with real memberlist and gRPC;
// every node after the first joins the first.
func startCluster(t testing.TB, n int, rules []window.Rule, now func() int64, opts ...func(*Config)) []*Node {
	t.Helper()
	var nodes []*Node
	for i := range n {
		nodes = append(nodes, startMemberClock(t, fmt.Sprintf("node-%d", i), rules, nodes, "", now, opts...))
	}
	waitFor(t, patience, "every node sees every other", func() bool {
		for _, nd := range nodes {
			if nd.metrics.Peers.Load() != int64(n-1) {
				return false
			}
		}
		return true
	})
	return nodes
}

func startMemberClock(t testing.TB, name string, rules []window.Rule, seeds []*Node, gossipAddr string, now func() int64, opts ...func(*Config)) *Node {
	t.Helper()
	if gossipAddr == "" {
		gossipAddr = "127.0.0.1:0"
	}
	var join []string
	for _, s := range seeds {
		if s != nil && s.GossipAddr() != "" {
			join = append(join, s.GossipAddr())
		}
	}
	cfg := Config{
		Name: name, Rules: rules, GRPCAddr: "127.0.0.1:0", BindAddr: gossipAddr, Join: join,
		JoinTimeout: 5 * time.Second, ShutdownTimeout: time.Second, Logger: testLogger(t), Now: clockOf(now),
		StrictBootstrapWait: freshBootstrapWait,
	}
	for _, o := range opts {
		o(&cfg)
	}
	nd, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}

// admissions counts admitted hits per window index, across nodes.
type admissions struct {
	mu  sync.Mutex
	per map[int64]int64
}

func (a *admissions) add(idx int64) {
	a.mu.Lock()
	a.per[idx]++
	a.mu.Unlock()
}

// counts returns what was admitted in window idx and the one before.
func (a *admissions) counts(idx int64) window.Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return window.Counts{Prev: a.per[idx-1], Curr: a.per[idx]}
}

// drive sends rate requests/s for key to node, paced on the wall clock,
// until ctx ends or, if n > 0, n requests have been sent, and records each
// admission in the window the node decided it in.
func drive(ctx context.Context, nd *Node, rule window.Rule, key string, rate float64, n int, a *admissions) {
	step := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for sent := 0; ctx.Err() == nil && (n <= 0 || sent < n); sent++ {
		d, err := nd.Allow(ctx, rule.Name, key, 1)
		if err == nil && d.Allowed {
			a.add(window.Index(d.At().UnixNano(), rule.Window))
		}
		next = next.Add(step)
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait) // pacing the load, not synchronising
		}
	}
}

// alignedClock returns a clock, shared by every node of a test, whose
// current window of length w starts now: tests then see whole windows
// without waiting for a boundary.
func alignedClock(w time.Duration) func() int64 {
	now := time.Now().UnixNano()
	offset := window.Start(window.Index(now, w)+1, w) - now
	return func() int64 { return time.Now().UnixNano() + offset }
}
