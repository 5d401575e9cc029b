package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// Config configures a node. The zero value plus Rules is a single in-memory
// node.
type Config struct {
	// Name identifies the node in the fleet; it must be stable across
	// restarts. Default: the host name.
	Name string
	// Rules are the limits the node enforces.
	Rules []window.Rule
	// DataDir keeps state across restarts; empty keeps everything in memory.
	DataDir string
	// Logger receives the node's logs; default slog.Default().
	Logger *slog.Logger
	// Now returns the current time in Unix nanoseconds; default the wall
	// clock. Tests inject a fake clock here.
	Now func() int64
}

// Node is one running sluice node.
type Node struct {
	cfg     Config
	log     *slog.Logger
	now     func() int64
	clock   *wallClock
	replica *counter.Replica

	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// ErrClosed is returned by calls on a closed node.
var ErrClosed = errors.New("sluice: node is closed")

// Start validates cfg and starts a node. The node runs until Close; ctx only
// bounds the start itself.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(cfg.Rules) == 0 {
		return nil, errors.New("sluice: config has no rules")
	}
	if cfg.Name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "sluice"
		}
		cfg.Name = host
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	clock := newWallClock()
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	self := counter.Incarnation{Node: cfg.Name, Boot: newBootID()}
	replica, err := counter.NewReplica(counter.Config{Self: self, Rules: cfg.Rules, Start: cfg.Now()})
	if err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg: cfg, log: cfg.Logger.With("node", cfg.Name), now: cfg.Now,
		replica: replica, cancel: cancel, wake: make(chan struct{}, 1), clock: clock,
	}
	n.wg.Add(1)
	go n.tickLoop(loopCtx)
	return n, nil
}

func newBootID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return binary.LittleEndian.Uint64(b[:])
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Allow checks hits (≥ 0; 0 asks without consuming) against rule for key and
// records them if admitted. A batched rule decides from this node's view and
// never waits on the network.
func (n *Node) Allow(ctx context.Context, rule, key string, hits int64) (window.Decision, error) {
	return n.replica.Allow(n.now(), rule, key, hits)
}

// Rules returns the node's rules.
func (n *Node) Rules() []window.Rule { return append([]window.Rule(nil), n.cfg.Rules...) }

// Close stops the node and releases everything it holds.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		n.wg.Wait()
	})
	return n.closeErr
}

// tickLoop drives the replica's sync rounds and expiry on the node's clock.
func (n *Node) tickLoop(ctx context.Context) {
	defer n.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := time.Duration(n.replica.NextTick() - n.now())
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		case <-timer.C:
		}
		n.clock.reanchor()
		n.send(n.replica.Tick(n.now()))
	}
}

// send delivers deltas to peers; a lone node has none.
func (n *Node) send(out []counter.Outbound) {}
