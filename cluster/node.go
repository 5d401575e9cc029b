package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/cluster/internal/metric"
	"github.com/sluicehq/sluice/cluster/internal/nodetls"
	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/window"
)

// Config configures a node. The zero value plus Rules is a single in-memory
// node that serves nothing but the Go API.
type Config struct {
	// Name identifies the node in the fleet; it must be unique and stable
	// across restarts. Default: the host name.
	Name string
	// Rules are the limits the node enforces. A rule that sets no
	// SyncInterval is batched at window.DefaultSyncInterval (see
	// window.Rule.WithDefaults); a strict one needs Strict.
	Rules []window.Rule
	// Strict switches strict mode on: set it to strict.Mode{} from package
	// cluster/strict to let rules be strict (SyncInterval window.Strict).
	// Nil, a strict rule fails Start and Reload with ErrStrictNotEnabled,
	// and the node links no Raft.
	Strict StrictMode

	// GRPCAddr is where the node serves the Limiter and Peer gRPC APIs
	// (HOST:PORT; port 0 picks a free one). Required in a cluster; empty
	// serves nothing.
	GRPCAddr string
	// TLS secures the gRPC port, for clients and peers, and the Raft
	// transport: peers are the holders of a peer CA's certificate (see
	// TLS). Nil serves plaintext, which a node does only on loopback
	// unless Insecure is set.
	TLS *TLS
	// Insecure serves plaintext gRPC and Raft on addresses other than
	// loopback, on purpose: whoever reaches them can call them as a
	// client or as a peer. Without TLS or Insecure, Start refuses a
	// GRPCAddr, BindAddr or RaftAddr beyond loopback. Gossip is secured
	// by SecretKeys, not by TLS.
	Insecure bool
	// SecretKeys encrypt and authenticate gossip (memberlist's keyring,
	// AES-GCM): each 16, 24 or 32 bytes (AES-128, AES-192 or AES-256), at
	// most MaxSecretKeys, none twice. The first encrypts what the node
	// sends; each is tried on what it receives. With keys, a node refuses
	// gossip not encrypted with one of them, so that a node without them,
	// or with others, can neither join the fleet nor gossip into it
	// (Metrics.GossipRefusals counts what was refused). SetSecretKeys
	// changes them while the node runs, for a rotation. Empty, gossip is
	// plaintext.
	SecretKeys [][]byte
	// GossipPlaintext is what a node with SecretKeys does with gossip
	// that is not encrypted: refused by default; accepted, or sent, while
	// a running fleet moves into or out of gossip encryption (see
	// GossipPlaintext). It is read at start alone.
	GossipPlaintext GossipPlaintext
	// GRPCAdvertiseAddr is the gRPC address peers dial; default the address
	// GRPCAddr bound to, with a wildcard host (0.0.0.0, [::]) replaced by
	// that of AdvertiseAddr or BindAddr, or by the private address gossip
	// advertises.
	GRPCAdvertiseAddr string
	// BindAddr is the gossip (memberlist) HOST:PORT; empty runs no gossip,
	// a single node.
	BindAddr string
	// AdvertiseAddr is the gossip HOST:PORT peers reach this node on;
	// default BindAddr.
	AdvertiseAddr string
	// Join are gossip addresses of peers to join: HOST:PORT, or
	// dns:NAME:PORT for every A/AAAA record of NAME (a Kubernetes headless
	// service).
	Join []string
	// JoinTimeout bounds how long Start tries the seeds and pulls state
	// from a peer before it serves anyway. Default 10s.
	JoinTimeout time.Duration
	// ReconnectInterval is how often the node tries the seeds it is not
	// joined to and a member that failed, so that a split fleet merges
	// again and a restarted seed is found. Default 5s.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long a failed member is retried before it is
	// forgotten. Default 24h.
	ReconnectTimeout time.Duration

	// RaftAddr is where the Raft transport of strict mode listens
	// (HOST:PORT); default the gRPC host on a free port. Only nodes with
	// strict rules use it.
	RaftAddr string
	// RaftAdvertiseAddr is the Raft address peers dial; default the address
	// RaftAddr bound to.
	RaftAdvertiseAddr string
	// StrictVoters is how many members vote in the strict Raft group:
	// 1, 3 (the default) or 5.
	StrictVoters int
	// StrictTimeout bounds a strict check that carries no deadline of its
	// own; past it, the rule's fail_mode answers. Default 1s.
	StrictTimeout time.Duration
	// StrictBootstrapWait is how long a node that finds no strict group
	// among the members it sees waits, its view of the fleet unchanged,
	// before it starts one. A node restarted without a DataDir has
	// forgotten the group its peers run, and a member of that group finds
	// it within a few gossip probes; started too soon, the node would run
	// a second group beside it. A fleet's first strict leader is elected
	// this long after its members have joined. Default 5s.
	StrictBootstrapWait time.Duration

	// DataDir keeps state across restarts; empty keeps everything in memory.
	DataDir string
	// PersistInterval is how often a node with a DataDir saves the counts
	// that changed: a crash (kill -9, power loss of the process) loses at
	// most what the node admitted in the last interval. Default 250ms.
	PersistInterval time.Duration
	// BorrowTimeout bounds how long a check on an owner-allocated rule waits
	// for the key's owner when this node's grant is spent: in all, and a
	// whole one more for each question the check asks; a check whose answer
	// does not come in time is decided from this node's view. A node whose
	// round trip to an owner is longer lives on the grants its reports
	// bring, and says so in them. Default 250ms.
	BorrowTimeout time.Duration
	// ShutdownTimeout bounds how long Close waits for in-flight gRPC calls.
	// Default 5s.
	ShutdownTimeout time.Duration
	// MaxKeys bounds the keys the node holds, every rule's limits
	// together, wherever they come from: checks, peers' deltas, state
	// pulls. Once it holds MaxKeys, a new key takes the place of one held:
	// one of the rule holding the most keys, a key used least recently
	// there first. An evicted key starts again from no count, as a new
	// one does, so a key evicted while its window runs may be admitted
	// more than its count in that window: set it well above the keys the
	// node serves in two windows; it is there to bound a flood of keys.
	// Default DefaultMaxKeys; negative: no bound. The keys the strict
	// log's state machine holds are not bounded by it (README, Memory).
	MaxKeys int
	// Logger receives the node's logs; default slog.Default().
	Logger *slog.Logger
	// Now returns the current time; default the wall clock. Tests and
	// examples inject a fake clock here. It is read on every check (and
	// turned into Unix nanoseconds once, for the counters): it should be
	// cheap and safe for concurrent use. Limiter.Wait sleeps on the wall
	// clock whatever Now says, so a fake clock must move for a Wait to end.
	Now func() time.Time
	// Network carries the node's traffic; nil is the host's TCP and UDP.
	// Fault tests run nodes on a network that partitions, drops and delays.
	Network Network

	// GRPCServices register more gRPC services on the node's server,
	// beside sluice's own, on the same port: the agent serves Envoy's rate
	// limit service this way. Each is called once, during Start, with the
	// node, before the server answers any call; a node without GRPCAddr
	// calls none. A service whose handlers check that their strings are
	// UTF-8 may pass the registrar to AcceptInvalidUTF8.
	GRPCServices []func(s grpc.ServiceRegistrar, n *Node)

	// GossipTuning, when set, adjusts the memberlist configuration the
	// node has filled in, before memberlist starts: its timings (fault
	// tests declare a silent member dead in a second rather than tens of
	// seconds). It must leave the name, addresses, delegates and transport
	// as they are.
	GossipTuning func(*memberlist.Config)
}

// Node is one running sluice node.
type Node struct {
	cfg     Config
	log     *slog.Logger
	now     func() int64 // the fleet's clock: ownNow corrected by skew
	ownNow  func() int64 // this node's own clock
	skew    *skewWatch
	clock   *wallClock
	self    counter.Incarnation
	hash    atomic.Uint64 // of the rules, for drift detection
	replica *counter.Replica
	metrics *counters
	// latency times checks, by window.Path and then latencyBorrow.
	latency [numPaths + 1]metric.Histogram
	// ready is set once the node holds the fleet's state: it pulled it
	// from a peer, or found itself alone (Ready).
	ready atomic.Bool

	tls     *nodetls.Reloader // nil without TLS
	store   *store.Store      // nil without DataDir
	server  *server           // nil without GRPCAddr
	members *membership       // nil without BindAddr
	strict  strictapi.Engine  // nil without Config.Strict
	peers   *peerSet
	borrows borrows
	// sendOrder is held while deltas are numbered and queued: a peer takes
	// a delta numbered before one it has for stale, so the two go together
	// (see sendInOrder).
	sendOrder sync.Mutex

	cancel context.CancelFunc
	done   <-chan struct{} // closed when the node starts closing

	changed atomic.Bool // counts changed since the last save

	rulesMu sync.Mutex // serialises Reload; guards cfg.Rules
	index   atomic.Pointer[ruleIndex]
	wake    chan struct{} // reschedules the tick loop, e.g. when peers change
	// relays are the pulls of members' state for incarnations this node
	// had not heard of (relaypull.go).
	relays relayPulls
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
	isClosing atomic.Bool // set first thing in Close, for health checks
}

// Start validates cfg and starts a node. With BindAddr it joins the cluster
// and pulls the current counts from a peer before it returns, so it never
// starts from an empty budget. The node runs until Close; ctx bounds only
// the start.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.Name), clock: newWallClock(), metrics: newCounters(),
		wake: make(chan struct{}, 1)}
	n.ownNow = n.clock.Now
	if now := cfg.Now; now != nil {
		n.ownNow = func() int64 { return now().UnixNano() }
	}
	parts := window.AllParts(cfg.Rules)
	n.index.Store(newRuleIndex(cfg.Rules, nil))
	n.skew = newSkewWatch(parts)
	n.now = func() int64 { return n.ownNow() + n.skew.fix.Load() }
	n.self = counter.Incarnation{Node: cfg.Name, Boot: newBootID()}
	n.metrics.Members.Store(1)
	n.hash.Store(rulesHash(parts))
	replica, err := counter.NewReplica(counter.Config{Self: n.self, Rules: parts, Start: n.now(), AskTimeout: cfg.BorrowTimeout,
		MaxKeys: max(cfg.MaxKeys, 0)})
	if err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	n.replica = replica
	// The TLS files first: a node that cannot read them opens nothing.
	if err := n.openTLS(); err != nil {
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, loopCtx.Done()
	n.peers = newPeerSet(n, loopCtx)
	if err := n.start(ctx, loopCtx); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

func (cfg *Config) defaults() error {
	if len(cfg.Rules) == 0 {
		return errors.New("sluice: config has no rules")
	}
	cfg.Rules = window.WithDefaults(cfg.Rules)
	if err := strictEnabled(cfg.Rules, cfg.Strict); err != nil {
		return fmt.Errorf("sluice: %w", err)
	}
	for i, r := range cfg.Rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("sluice: rule %d (%q): %w", i+1, r.Name, err)
		}
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
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 10 * time.Second
	}
	if cfg.PersistInterval <= 0 {
		cfg.PersistInterval = defaultPersistInterval
	}
	if cfg.ReconnectInterval <= 0 {
		cfg.ReconnectInterval = defaultReconnectInterval
	}
	if cfg.ReconnectTimeout <= 0 {
		cfg.ReconnectTimeout = defaultReconnectTimeout
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.BorrowTimeout <= 0 {
		cfg.BorrowTimeout = DefaultBorrowTimeout
	}
	if cfg.StrictTimeout <= 0 {
		cfg.StrictTimeout = defaultStrictTimeout
	}
	if cfg.StrictBootstrapWait <= 0 {
		cfg.StrictBootstrapWait = defaultStrictBootstrapWait
	}
	switch cfg.StrictVoters {
	case 0:
		cfg.StrictVoters = defaultStrictVoters
	case 1, 3, 5:
	default:
		return fmt.Errorf("sluice: StrictVoters must be 1, 3 or 5, got %d", cfg.StrictVoters)
	}
	if cfg.BindAddr != "" && cfg.GRPCAddr == "" {
		return errors.New("sluice: a clustered node (BindAddr set) needs GRPCAddr for its peers")
	}
	if err := cfg.checkTLS(); err != nil {
		return err
	}
	if err := cfg.checkGossipKeys(); err != nil {
		return err
	}
	for _, a := range []struct{ field, addr string }{
		{"GRPCAddr", cfg.GRPCAddr}, {"GRPCAdvertiseAddr", cfg.GRPCAdvertiseAddr},
		{"BindAddr", cfg.BindAddr}, {"AdvertiseAddr", cfg.AdvertiseAddr},
		{"RaftAddr", cfg.RaftAddr}, {"RaftAdvertiseAddr", cfg.RaftAdvertiseAddr},
	} {
		if a.addr != "" {
			if err := CheckHostPort(a.field, a.addr); err != nil {
				return fmt.Errorf("sluice: %w", err)
			}
		}
	}
	return nil
}

// start brings up storage, the gRPC server and membership, in that order,
// then pulls state from a peer.
func (n *Node) start(ctx, loopCtx context.Context) error {
	if n.cfg.DataDir != "" {
		st, err := store.Open(n.cfg.DataDir, store.WithLogger(n.log))
		if err != nil {
			return fmt.Errorf("sluice: data_dir: %w", err)
		}
		n.store = st
		if err := n.restore(); err != nil {
			return err
		}
	}
	if n.cfg.GRPCAddr != "" {
		srv, err := newServer(ctx, n)
		if err != nil {
			return err
		}
		n.server = srv
	}
	if n.cfg.Strict != nil {
		if err := n.openStrict(ctx); err != nil {
			return err
		}
	}
	if n.cfg.BindAddr != "" {
		m, err := newMembership(n)
		if err != nil {
			return err
		}
		n.members = m
	}
	if n.server != nil {
		n.server.serve(n.log)
	}
	if m := n.members; m != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			m.run(loopCtx)
		}()
		joinCtx, cancel := context.WithTimeout(ctx, n.cfg.JoinTimeout)
		defer cancel()
		joined := m.join(joinCtx)
		pulled, alone := n.pullState(joinCtx, joined)
		if pulled || alone {
			n.ready.Store(true)
		}
		if !pulled {
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				n.pullLater(loopCtx)
			}()
		}
	} else {
		n.ready.Store(true) // no gossip: a node alone by design
	}
	if n.strict != nil {
		// Served once membership exists: the group finds its voters there.
		waitCtx, cancel := context.WithTimeout(ctx, n.cfg.JoinTimeout)
		defer cancel()
		n.strict.Serve(waitCtx)
	}
	n.wg.Add(1)
	go n.tickLoop(loopCtx)
	if n.store != nil {
		n.wg.Add(1)
		go n.persistLoop(loopCtx)
	}
	return nil
}

func newBootID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return binary.LittleEndian.Uint64(b[:])
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Incarnation returns the node's name and the boot id of this run.
func (n *Node) Incarnation() counter.Incarnation { return n.self }

// GRPCAddr returns the address the gRPC server listens on, or "".
func (n *Node) GRPCAddr() string {
	if n.server == nil {
		return ""
	}
	return n.server.addr()
}

// GossipAddr returns the address memberlist listens on, or "".
func (n *Node) GossipAddr() string {
	if n.members == nil {
		return ""
	}
	return n.members.addr()
}

// Metrics returns the node's node-wide counters and gauges. RuleStats,
// PeerStats, MemberStates, DecisionLatency and StrictApplyLatency hold the
// rest of its metrics.
func (n *Node) Metrics() Metrics {
	m := n.metrics.snapshot()
	for _, st := range n.RuleStats() {
		for p := range st.Decisions {
			m.ShadowRefusals += int64(st.Decisions[p][ResultShadowRefused])
		}
	}
	return m
}

// ReloadFailed counts a reload that failed before it could call Reload,
// in Metrics.ReloadErrors: the agent calls it when the config file it
// rereads on SIGHUP does not parse, so that the metric counts every
// reload an operator asked for and did not get.
func (n *Node) ReloadFailed() { n.metrics.ReloadErrors.Add(1) }

// Ready reports whether the node holds the fleet's state and is not
// closing: it pulled the counts from a peer, at start or later (a node
// that could not pull before serving keeps trying), or it is alone: it
// has no gossip, no seeds, or seeds that led to no member but itself. A
// node that is not ready still decides checks, from the counts it has; an
// orchestrator holds traffic back from it (the agent's /readyz).
func (n *Node) Ready() bool { return n.ready.Load() && !n.isClosing.Load() }

// Allow checks hits (≥ 0; 0 asks without consuming) against rule for key and
// records them if admitted. A program that checks one rule often takes a
// Limiter for it instead, which finds a misspelt rule once, at the start;
// Allow names the rule on every call. A batched rule decides from this node's view; one
// with owner allocation may wait for the key's owner when this node's grant
// is spent and the fleet may have room: up to BorrowTimeout, twice that if
// it asks, three times if its answer comes in the next window. A strict rule
// decides through the Raft log (without a quorum, by its fail mode), within
// StrictTimeout and ctx.
//
// Errors, deciding nothing: ErrClosed once the node is closing; ctx's error
// when ctx has ended before the check (or, for a check that waits, while it
// waits); ErrUnknownRule (with ErrRuleNotUTF8 for a name that is not
// UTF-8, ErrRuleTooLong for one longer than any rule's), ErrEmptyKey, ErrKeyTooLong, ErrKeyNotUTF8, ErrNegativeHits and
// ErrHitsOverCount for a check that could never be decided (for a strict
// rule, ErrHitsOverCount also when the rule as the log has it, from the
// leader's configuration, has a smaller count, whichever node leads); and,
// for a strict rule, ErrOutcomeUnknown when the check may or may not have
// been spent.
func (n *Node) Allow(ctx context.Context, rule, key string, hits int64) (Decision, error) {
	var d Decision
	err := n.allow(ctx, rule, key, hits, nil, &d, false)
	return d, err
}

// allow is Allow, which inlines it, writing the decision to out. For a
// batched rule, a non-nil tk is set to where the hits admitted were
// counted, so that they can be refunded; a strict decision leaves it as it
// is. The decision is written field by field, rather than returned and
// converted, because copying the core's decision whole into the API's
// costs a tenth of a check.
//
// allow counts the check in the rule's metrics (RuleStats), unless part
// says it is one part of a check its caller counts whole (AllowAll's).
// A batched rule's decision for a check without a ticket, the common
// check, is counted by its table, under the shard lock the decision holds
// anyway (counter.Tally); the others (strict paths, errors, reservations
// and AllowAll's checks) here.
func (n *Node) allow(ctx context.Context, rule, key string, hits int64, tk *counter.Ticket, out *Decision, part bool) error {
	x := n.index.Load()
	if n.isClosing.Load() {
		// An atomic read, not a select on done: 1,164 instructions a check
		// instead of 1,341 (callgrind, BenchmarkAllow).
		if !part {
			n.countError(x, rule)
		}
		return ErrClosed
	}
	if x.multi && tk == nil && x.parts[rule] != nil {
		// A rule with several limits. A check that brings a ticket is one
		// of its parts, or a reservation, which Reserve splits itself.
		return n.allowParts(ctx, x, rule, key, hits, out)
	}
	if err := ctx.Err(); err != nil {
		if !part {
			n.countError(x, rule)
		}
		return err
	}
	// The node's own clock times the check; the fleet's decides it.
	own := n.ownNow()
	now := own + n.skew.fix.Load()
	if n.strict != nil {
		if d, ok, err := n.strict.Allow(ctx, rule, key, hits); ok {
			out.from(&d)
			if x.anyShadow {
				n.shadowed(x, rule, out)
			}
			n.countStrict(x, rule, own, out, err)
			return err
		}
	}
	d, err := n.allowBatched(ctx, rule, key, hits, tk, own, now, !part)
	if d.Allowed && hits > 0 && !n.changed.Load() {
		// Read first: a store on every check would keep the flag's cache
		// line moving between cores.
		n.changed.Store(true)
	}
	out.from(&d)
	if err != nil {
		if !part {
			n.countError(x, rule)
		}
		return err
	}
	if x.anyShadow {
		n.shadowed(x, rule, out)
	}
	if tk != nil && !part {
		n.countCheck(x, rule, out) // the table tallies checks without a ticket only
	}
	return nil
}

// Check reports the error Allow would return for a check (unknown rule,
// empty or over-long key, hits out of range), without spending anything.
func (n *Node) Check(rule, key string, hits int64) error {
	return n.replica.Check(rule, key, hits)
}

// View returns this node's own and whole-view counts for key under rule, at
// the current time: what it admitted itself, and what it believes the fleet
// admitted in the current and previous windows.
func (n *Node) View(rule, key string) (own, view window.Counts, err error) {
	t := n.replica.Table(rule)
	if t == nil {
		return own, view, counter.UnknownRule(rule)
	}
	own, view = t.Counts(key, n.now())
	return own, view, nil
}

// Rules returns the node's rules.
func (n *Node) Rules() []window.Rule {
	n.rulesMu.Lock()
	defer n.rulesMu.Unlock()
	return append([]window.Rule(nil), n.cfg.Rules...)
}

// rulesAndHash returns the node's rules and the hash it gossips of them,
// read together: Reload changes both under rulesMu, so an answer never
// pairs one rule set with the other's hash.
func (n *Node) rulesAndHash() ([]window.Rule, uint64) {
	n.rulesMu.Lock()
	defer n.rulesMu.Unlock()
	return append([]window.Rule(nil), n.cfg.Rules...), n.rulesHash()
}

// Close leaves the cluster, stops the node and releases everything it holds.
// A node with a DataDir saves its counts first, so a restart keeps them.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.isClosing.Store(true)
		var errs []error
		if n.members != nil {
			errs = append(errs, n.members.leave())
		}
		n.cancel()
		n.stopStrictRaft()
		n.wg.Wait()
		n.peers.closeAll()
		if n.server != nil {
			n.server.stop(n.cfg.ShutdownTimeout)
		}
		if n.strict != nil {
			n.strict.Close()
		}
		if n.store != nil {
			errs = append(errs, n.persist(), n.store.Close())
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// Kill stops the node abruptly, as a crash would: no leave message, no
// saved state. Tests use it to exercise failure detection and restarts.
func (n *Node) Kill() {
	n.closeOnce.Do(func() {
		n.isClosing.Store(true)
		if n.members != nil {
			n.members.shutdown()
		}
		n.cancel()
		n.stopStrictRaft()
		n.wg.Wait()
		n.peers.closeAll()
		if n.server != nil {
			n.server.stop(0)
		}
		if n.strict != nil {
			n.strict.Close()
		}
		if n.store != nil {
			n.store.Close()
		}
		n.closeErr = ErrClosed
	})
}

// stopStrictRaft shuts strict mode's Raft down, and its loops, before the
// node waits for its own: a loop waiting on a Raft future (an entry that
// cannot commit while a partition holds) is then answered with
// ErrRaftShutdown instead of holding Close or Kill until the partition
// heals.
func (n *Node) stopStrictRaft() {
	if n.strict != nil {
		n.strict.Stop()
	}
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
			continue
		case <-timer.C:
		}
		n.clock.reanchor()
		now := n.now()
		n.sendOrder.Lock()
		n.peers.send(n.replica.Tick(now), now)
		n.sendOrder.Unlock()
		n.metrics.SyncedThrough.Store(n.peers.writtenThrough())
	}
}

// rulesHash identifies the node's current rule set.
func (n *Node) rulesHash() uint64 { return n.hash.Load() }

// Reload replaces the node's rules while it runs (the agent reloads its
// config file on SIGHUP). A rule keeps the counts of its current windows when
// its window length and type stay the same, whatever else changes: its
// count, sync interval or allocation, or a move between batched and strict.
// A rule turning strict brings its counts into the Raft log; a rule leaving
// strict takes the log's counts back to every node's batched table. Reload
// every node of a fleet: until the strict leader has reloaded, a rule it
// does not know as strict answers strict checks by its fail_mode, and
// fail_mode local then decides from the counts the fleet reported, not from
// zero; the leader's log counts what nodes still treating a rule as batched
// admit.
//
// Each call counts in the node's metrics (Metrics.Reloads or ReloadErrors).
func (n *Node) Reload(ctx context.Context, rules []window.Rule) (err error) {
	defer func() {
		if err != nil {
			n.metrics.ReloadErrors.Add(1)
		} else {
			n.metrics.Reloads.Add(1)
		}
	}()
	if len(rules) == 0 {
		return errors.New("sluice: reload has no rules")
	}
	rules = window.WithDefaults(rules)
	if err := strictEnabled(rules, n.cfg.Strict); err != nil {
		return fmt.Errorf("sluice: reload: %w", err)
	}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("sluice: reload: rule %d (%q): %w", i+1, r.Name, err)
		}
	}
	parts := window.AllParts(rules)
	n.rulesMu.Lock()
	defer n.rulesMu.Unlock()
	now := n.now()
	if err := n.replica.SetRules(parts, now); err != nil {
		return fmt.Errorf("sluice: reload: %w", err)
	}
	if n.strict != nil {
		if err := n.strict.SetRules(ctx, parts); err != nil {
			return fmt.Errorf("sluice: reload: %w", err)
		}
	}
	n.cfg.Rules = append([]window.Rule(nil), rules...)
	n.index.Store(newRuleIndex(n.cfg.Rules, n.index.Load()))
	n.skew.setRules(parts)
	n.hash.Store(rulesHash(parts))
	if n.members != nil {
		if err := n.members.updateMeta(); err != nil {
			n.log.Warn("gossiping the new rules", "err", err)
		}
	}
	if n.strict != nil {
		n.strict.SyncRules(ctx)
	}
	n.rescheduleTicks()
	n.log.Info("rules reloaded", "rules", len(rules))
	return nil
}

// rescheduleTicks makes the tick loop recompute when its next round is due.
func (n *Node) rescheduleTicks() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// listen opens a stream listener on the node's network, honouring ctx.
func (n *Node) listen(ctx context.Context, addr string) (net.Listener, error) {
	return n.network().Listen(ctx, addr)
}
