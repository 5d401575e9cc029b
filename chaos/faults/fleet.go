package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/chaos/faultnet"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// Options describe a fleet.
type Options struct {
	// Nodes is how many nodes to run, named n0, n1, …; every later node
	// joins n0.
	Nodes int
	// Rules are every node's rules.
	Rules []window.Rule
	// DataDir, when set, is a directory under which each node keeps its
	// state (DataDir/NAME), so a restart finds it. Empty keeps every node
	// in memory.
	DataDir string
	// Seed seeds the switchboard's random choices.
	Seed int64
	// Logger receives the nodes' logs; nil discards them.
	Logger *slog.Logger
	// StrictVoters and StrictTimeout are passed to every node (zero: the
	// node's defaults).
	StrictVoters  int
	StrictTimeout time.Duration
	// PersistInterval is how often a node with a data directory saves its
	// counts (zero: the node's default).
	PersistInterval time.Duration
	// JoinTimeout bounds how long a node's start waits for a seed and a
	// peer's state (zero: 10 s). A node restarted across a cut waits this
	// long before it serves alone.
	JoinTimeout time.Duration
}

// freshFleetBootstrapWait is the nodes' StrictBootstrapWait: short, since a
// fleet that starts together has no strict group a member could have
// forgotten.
const freshFleetBootstrapWait = 200 * time.Millisecond

// Fleet is a set of real sluice nodes in this process, every one on the
// same switchboard and reading its clock from it. A node can be killed and
// restarted under its name; the fleet keeps each node's last addresses so a
// restart comes back where the node was, as a restarted agent does.
type Fleet struct {
	// Net is the switchboard the nodes talk through.
	Net   *faultnet.Switchboard
	opts  Options
	names []string

	mu      sync.Mutex
	members map[string]*member
	events  []Event
}

// member is one node name and its current run.
type member struct {
	cfg    cluster.Config
	node   *cluster.Node // nil while down
	grpc   string        // addresses of the last run
	gossip string
	runs   int
}

// Event is a fault or step of a scenario, at the switchboard's true time.
type Event struct {
	At   int64
	What string
}

// Start starts the fleet and returns once every node sees every other as a
// member and a sync peer. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Fleet, error) {
	if opts.Nodes < 1 {
		return nil, fmt.Errorf("faults: Nodes must be ≥ 1, got %d", opts.Nodes)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = 10 * time.Second
	}
	f := &Fleet{Net: faultnet.New(opts.Seed), opts: opts, members: map[string]*member{}}
	for i := range opts.Nodes {
		name := fmt.Sprintf("n%d", i)
		f.names = append(f.names, name)
		cfg := cluster.Config{
			Name: name, Rules: opts.Rules,
			GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0",
			JoinTimeout: opts.JoinTimeout, ShutdownTimeout: time.Second,
			// A fleet that starts together has no group anyone forgot; a
			// restarted member joins the live ones and hears of theirs.
			StrictBootstrapWait: freshFleetBootstrapWait,
			StrictVoters:        opts.StrictVoters, StrictTimeout: opts.StrictTimeout, PersistInterval: opts.PersistInterval,
			Logger: opts.Logger, Now: f.Net.Clock(name), Network: f.Net.Node(name),
			Strict: strict.Mode{},
		}
		if opts.DataDir != "" {
			cfg.DataDir = filepath.Join(opts.DataDir, name)
		}
		if i > 0 {
			cfg.Join = []string{f.members["n0"].gossip}
		}
		m := &member{cfg: cfg}
		f.members[name] = m
		if err := f.run(ctx, m, cfg); err != nil {
			return nil, errors.Join(err, f.Close())
		}
	}
	if err := f.WaitFormed(ctx, 30*time.Second, f.names); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// run starts m's node with cfg and records its addresses.
func (f *Fleet) run(ctx context.Context, m *member, cfg cluster.Config) error {
	nd, err := cluster.Start(ctx, cfg)
	if err != nil {
		return fmt.Errorf("faults: start %s: %w", cfg.Name, err)
	}
	f.mu.Lock()
	m.node, m.grpc, m.gossip = nd, nd.GRPCAddr(), nd.GossipAddr()
	m.runs++
	f.mu.Unlock()
	return nil
}

// Names returns the names of every node, up or down, in order.
func (f *Fleet) Names() []string { return slices.Clone(f.names) }

// Node returns the named node's current run, or nil while it is down.
func (f *Fleet) Node(name string) *cluster.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.members[name]; m != nil {
		return m.node
	}
	return nil
}

// Up returns the names of the nodes running now.
func (f *Fleet) Up() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var up []string
	for _, name := range f.names {
		if f.members[name].node != nil {
			up = append(up, name)
		}
	}
	return up
}

// Kill stops the named node as kill -9 would: no leave, no flush.
func (f *Fleet) Kill(name string) error {
	f.mu.Lock()
	m := f.members[name]
	if m == nil || m.node == nil {
		f.mu.Unlock()
		return fmt.Errorf("faults: kill %s: not running", name)
	}
	nd := m.node
	m.node = nil
	f.mu.Unlock()
	f.Mark("kill " + name)
	return stopWithin(nd, killTimeout)
}

// killTimeout bounds how long Kill waits for a node to stop. A crash is
// instant; a node whose Kill blocks this long is stuck in its own shutdown,
// and the scenario reports it rather than hanging.
const killTimeout = time.Minute

// stopWithin kills nd and waits up to within for it to stop. A node that
// does not stop in time is left behind, still stopping.
func stopWithin(nd *cluster.Node, within time.Duration) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		nd.Kill()
	}()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("faults: kill %s: the node did not stop within %v; goroutines: %s", nd.Name(), within, dumpGoroutines())
	}
}

// Restart starts the named node again under its name, with its data
// directory if it has one, on its last gRPC and gossip addresses (fresh
// ones if those are taken), joining every other node's gossip address. It
// returns once the node serves; across a cut, after the join timeout.
func (f *Fleet) Restart(ctx context.Context, name string) error {
	f.mu.Lock()
	m := f.members[name]
	if m == nil || m.node != nil {
		f.mu.Unlock()
		return fmt.Errorf("faults: restart %s: not down", name)
	}
	cfg := m.cfg
	cfg.GRPCAddr, cfg.BindAddr = m.grpc, m.gossip
	cfg.Join = nil
	for _, other := range f.names {
		if other != name {
			cfg.Join = append(cfg.Join, f.members[other].gossip)
		}
	}
	f.mu.Unlock()
	f.Mark("restart " + name)
	err := f.run(ctx, m, cfg)
	if err != nil && addrInUse(err) {
		cfg.GRPCAddr, cfg.BindAddr = "127.0.0.1:0", "127.0.0.1:0"
		err = f.run(ctx, m, cfg)
	}
	return err
}

// addrInUse reports whether a start failed because a port of the last run
// has been taken meanwhile. The fleet's nodes listen through faultnet,
// whose errors keep the listen's *net.OpError (or, for an address the
// switchboard still gives another node, wrap EADDRINUSE), and the cluster
// wraps them with %w, so the errno survives to here. (memberlist's own
// transport, which the fleet does not use, formats it away with %v.)
func addrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }

// Mark records a step of the scenario at the switchboard's time.
func (f *Fleet) Mark(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, Event{At: f.Net.Now(), What: what})
}

// Events returns the steps marked so far, in order.
func (f *Fleet) Events() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// Partition splits the fleet as Switchboard.Partition does and marks it.
func (f *Fleet) Partition(groups ...[]string) {
	f.Mark(fmt.Sprintf("partition %v", groups))
	f.Net.Partition(groups...)
}

// Heal heals the switchboard and marks it.
func (f *Fleet) Heal() {
	f.Mark("heal")
	f.Net.Heal()
}

// WaitFormed waits until every running node of group sees exactly the
// running nodes of group as members and sync peers, or within passes.
func (f *Fleet) WaitFormed(ctx context.Context, within time.Duration, group []string) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var up []*cluster.Node
		for _, name := range group {
			if nd := f.Node(name); nd != nil {
				up = append(up, nd)
			}
		}
		n := int64(len(up))
		var lagging *cluster.Node
		for _, nd := range up {
			m := nd.Metrics()
			if m.Members != n || m.Peers != n-1 {
				lagging = nd
				break
			}
		}
		if lagging == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			m := lagging.Metrics()
			return fmt.Errorf("faults: %v did not form within %v: %s sees %d members and %d peers, want %d and %d",
				group, within, lagging.Name(), m.Members, m.Peers, n, n-1)
		case <-tick.C:
		}
	}
}

// Close stops every running node and then the switchboard.
func (f *Fleet) Close() error {
	f.mu.Lock()
	var nodes []*cluster.Node
	for _, name := range f.names {
		if m := f.members[name]; m != nil && m.node != nil {
			nodes = append(nodes, m.node)
			m.node = nil
		}
	}
	f.mu.Unlock()
	// Kill rather than Close: a clean leave across a cut would wait on
	// peers that cannot answer, and the scenarios are over.
	var errs []error
	for _, nd := range nodes {
		errs = append(errs, stopWithin(nd, killTimeout))
	}
	return errors.Join(append(errs, f.Net.Close())...)
}

// FormatEvents lists events relative to start, one a line.
func FormatEvents(events []Event, start int64) string {
	sort.SliceStable(events, func(i, j int) bool { return events[i].At < events[j].At })
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "  %8.3fs  %s\n", float64(e.At-start)/1e9, e.What)
	}
	return b.String()
}

// dumpGoroutines writes every goroutine's stack to a temporary file, for a
// node that would not stop, and returns the file's name.
func dumpGoroutines() string {
	f, err := os.CreateTemp("", "sluice-chaos-goroutines-*.txt")
	if err != nil {
		return "not written: " + err.Error()
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return "not written: " + err.Error()
	}
	return f.Name()
}
