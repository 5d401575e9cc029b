// Package bench runs sluice scenarios on a real cluster in this process:
// real nodes, real memberlist gossip and gRPC delta sync over loopback, in
// wall-clock time. It is the counterpart of chaos/sim, which runs the same
// scenarios in virtual time: the two take the same sim.Config and return the
// same sim.Result, so their figures can be laid side by side. Memory is the
// exception: it measures the counter tables alone, in virtual time, with no
// network, so that fleets far larger than one machine can run are sized.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// freshBootstrapWait is the nodes' StrictBootstrapWait: a fleet started
// together for a run has no strict group a member could have forgotten.
const freshBootstrapWait = 100 * time.Millisecond

// MaxNodes is the most nodes StartCluster runs in one process.
const MaxNodes = 64

// formTimeout bounds how long StartCluster waits for the nodes to see each
// other once they have all started. It takes well under a second on an idle
// machine; a join whose gossip was dropped on a machine too busy to read
// its sockets completes at memberlist's next push-pull (every 15 s on
// loopback), which a bound of 20 s missed once under load.
const formTimeout = time.Minute

// Cluster is a set of nodes running in this process on loopback, sharing
// one clock that can be shifted forward before traffic starts.
type Cluster struct {
	// Nodes are the running nodes, n0 first; every later node joined n0.
	Nodes []*cluster.Node
	clock *clock
}

// clock is the nodes' clock: the monotonic wall clock plus an offset that
// AlignNext moves forward.
type clock struct {
	base      time.Time
	baseNanos int64
	offset    atomic.Int64
}

func newClock() *clock {
	now := time.Now()
	return &clock{base: now, baseNanos: now.UnixNano()}
}

// Now returns the current time in Unix nanoseconds.
func (c *clock) Now() int64 { return c.baseNanos + int64(time.Since(c.base)) + c.offset.Load() }

// Time is Now as cluster.Config.Now takes it.
func (c *clock) Time() time.Time { return time.Unix(0, c.Now()) }

// StartCluster starts n nodes named n0…n(n−1) with rules on loopback (gRPC
// and gossip ports picked free), every node after the first joining the
// first, and returns once every node sees every other as a member and a
// sync peer. logger receives the nodes' logs (nil: discarded). On error
// nothing is left running.
func StartCluster(ctx context.Context, n int, rules []window.Rule, logger *slog.Logger) (*Cluster, error) {
	return startCluster(ctx, n, rules, logger, nil)
}

// startCluster is StartCluster with tweak, if set, applied to each node's
// configuration before the node starts.
func startCluster(ctx context.Context, n int, rules []window.Rule, logger *slog.Logger, tweak func(*cluster.Config)) (*Cluster, error) {
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("nodes must be in [1, %d] for an in-process cluster, got %d", MaxNodes, n)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{clock: newClock()}
	for i := range n {
		var join []string
		if i > 0 {
			join = []string{c.Nodes[0].GossipAddr()}
		}
		cfg := cluster.Config{
			Name: fmt.Sprintf("n%d", i), Rules: rules,
			GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", Join: join,
			JoinTimeout: 5 * time.Second, ShutdownTimeout: time.Second,
			Logger: logger, Now: c.clock.Time, StrictBootstrapWait: freshBootstrapWait,
			Strict: strict.Mode{},
		}
		if tweak != nil {
			tweak(&cfg)
		}
		nd, err := cluster.Start(ctx, cfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("start node n%d: %w", i, err), c.Close())
		}
		c.Nodes = append(c.Nodes, nd)
	}
	if err := c.waitFormed(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// waitFormed polls the nodes' membership gauges until every node counts n
// members and n−1 sync peers; memberlist offers no event to wait on.
func (c *Cluster) waitFormed(ctx context.Context) error {
	n := int64(len(c.Nodes))
	ctx, cancel := context.WithTimeout(ctx, formTimeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		formed := true
		var lagging *cluster.Node
		for _, nd := range c.Nodes {
			m := nd.Metrics()
			if m.Members != n || m.Peers != n-1 {
				formed, lagging = false, nd
				break
			}
		}
		if formed {
			return nil
		}
		select {
		case <-ctx.Done():
			m := lagging.Metrics()
			return fmt.Errorf("cluster of %d nodes did not form: node %s sees %d members and %d peers: %w",
				n, lagging.Name(), m.Members, m.Peers, ctx.Err())
		case <-tick.C:
		}
	}
}

// Now returns the nodes' current time in Unix nanoseconds.
func (c *Cluster) Now() int64 { return c.clock.Now() }

// AlignNext shifts the nodes' clock forward (by less than w) so that a
// boundary of windows of length w falls lead from now, and returns that
// boundary. A run then starts on a whole window without waiting for one.
// Shift only before the nodes have counted anything: a jump moves every
// window the nodes hold.
func (c *Cluster) AlignNext(w, lead time.Duration) int64 {
	at := c.clock.Now() + int64(lead)
	boundary := window.Start(window.Index(at, w), w)
	if boundary < at {
		boundary += int64(w)
	}
	c.clock.offset.Add(boundary - at)
	return boundary
}

// Close stops every node and waits until they are down. Nodes leave one at
// a time, last first, so each leave is gossiped to nodes still running.
func (c *Cluster) Close() error {
	var errs []error
	for _, nd := range slices.Backward(c.Nodes) {
		if err := nd.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", nd.Name(), err))
		}
	}
	return errors.Join(errs...)
}
