// Package strictapi is the contract between a node (package cluster) and
// its strict mode (package cluster/strict): what an embedder sets to switch
// strict mode on (Mode), what strict mode needs from its node (Host), and
// what the node asks of strict mode (Engine). Neither of the two packages
// imports the other, so a program that runs no strict rules links no Raft.
package strictapi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/cluster/internal/metric"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/window"
)

// ErrOutcomeUnknown is returned for a strict check that reached the leader
// but whose log entry may or may not have committed (leadership was lost,
// or the check's deadline passed, mid-flight). The check may have been
// spent; the caller decides whether to retry. Package cluster re-exports
// it.
var ErrOutcomeUnknown = errors.New("sluice: strict check outcome unknown")

// Mode switches strict mode on for a node: cluster.Config.Strict holds one,
// and package cluster/strict provides it (strict.Mode).
type Mode interface {
	// Open returns the strict mode of the node h. The node calls it once,
	// while it starts, after its gRPC server exists and before it serves:
	// strict mode registers its service then. No Raft group runs until
	// SetRules brings a strict rule.
	Open(h Host) (Engine, error)
}

// Settings are the parts of the node's configuration strict mode reads,
// with the node's defaults applied.
type Settings struct {
	// Name is the node's name in the fleet.
	Name string
	// DataDir keeps the Raft log and snapshots across restarts; empty
	// keeps them in memory.
	DataDir string
	// Clustered is set when the node gossips with peers (its BindAddr is
	// set); a lone node's log needs no network.
	Clustered bool
	// RaftAddr and RaftAdvertiseAddr are where the Raft transport listens
	// and the address peers dial (HOST:PORT; empty: the defaults).
	RaftAddr, RaftAdvertiseAddr string
	// Voters is how many members vote in the group: 1, 3 or 5.
	Voters int
	// Timeout bounds a strict check that carries no deadline of its own.
	Timeout time.Duration
	// BootstrapWait is how long a node that finds no group waits, its view
	// of the fleet unchanged, before it starts one.
	BootstrapWait time.Duration
	// ReconnectInterval is how often the node retries the seeds it is not
	// joined to: a node alone waits past it before it starts a group.
	ReconnectInterval time.Duration
}

// Host is what strict mode needs from its node.
type Host interface {
	// Settings returns the node's strict settings; they never change.
	Settings() Settings
	// Self is the node's name and the boot id of this run.
	Self() counter.Incarnation
	// Logger receives strict mode's logs, tagged with the node.
	Logger() *slog.Logger
	// Now is the fleet's clock, Unix nanoseconds.
	Now() int64
	// Replica is the node's counter replica: its batched view, which
	// validates checks, answers fail-local checks, seeds rules entering
	// the log and takes back the counts of rules leaving it.
	Replica() *counter.Replica
	// MarkChanged tells the node its counts changed outside its own
	// checks (a fail-local admission), so that it saves them.
	MarkChanged()
	// Store is the node's store, nil without a data dir.
	Store() *store.Store
	// GRPCAddr is the address the node's gRPC server listens on, "" when
	// it serves none.
	GRPCAddr() string
	// ListenRaft opens the Raft transport's listener on the node's
	// network. With the node's TLS, it accepts peers alone (a peer CA's
	// certificate), each connection once its handshake has completed.
	ListenRaft(ctx context.Context, addr string) (net.Listener, error)
	// DialRaft opens a stream to a peer's Raft transport at addr on the
	// node's network; with the node's TLS, the handshake has completed,
	// within ctx, and the peer's certificate is a peer CA's.
	DialRaft(ctx context.Context, addr string) (net.Conn, error)
	// RegisterService adds a gRPC service to the node's server; a node
	// without a server drops it.
	RegisterService(desc *grpc.ServiceDesc, impl any)
	// Peers returns the node's live peers.
	Peers() []Peer
	// Broadcast sends d to every live peer, waiting for room in a slow
	// peer's queue until ctx ends.
	Broadcast(ctx context.Context, d *counter.Delta)
	// Counters are strict mode's metrics, which the node exports.
	Counters() *Counters
}

// Peer is a live peer of the node, as its gossiped metadata describes it.
type Peer struct {
	// Name is the peer's node name.
	Name string
	// RaftAddr is the peer's Raft address; empty when it runs no group.
	RaftAddr string
	// RaftID is the peer's server ID in the group.
	RaftID string
	// Conn is the node's connection to the peer's gRPC server.
	Conn *grpc.ClientConn
}

// Engine is a node's strict mode, as the node drives it.
type Engine interface {
	// SetRules gives strict mode the node's rules, at start and at each
	// reload: it starts the Raft group when the first strict rule comes.
	SetRules(ctx context.Context, rules []window.Rule) error
	// Serve starts strict mode's loops once the node's membership is up,
	// and waits, within ctx, for a leader that knows the node's rules.
	Serve(ctx context.Context)
	// Allow decides a check on a strict rule; strict is false, and nothing
	// is decided, when rule is not one of them.
	Allow(ctx context.Context, rule, key string, hits int64) (d window.Decision, strict bool, err error)
	// AllowAll decides checks on strict rules all or nothing, in one run
	// of the log: a decision per check, in order. strict is false, and
	// nothing is decided, when a rule is not one of them.
	AllowAll(ctx context.Context, checks []Check) (ds []window.Decision, strict bool, err error)
	// AllowEach decides checks on strict rules each on its own, in order,
	// in one run of the log: a batch's checks wait for one entry, not one
	// each. When no leader answers in time each is answered by its own
	// rule's fail mode. strict is false, and nothing is decided, when a
	// rule is not one of them.
	AllowEach(ctx context.Context, checks []Check) (ds []window.Decision, strict bool, err error)
	// SyncRules, on the leader, brings the log's rules in line with the
	// node's at once.
	SyncRules(ctx context.Context)
	// Received notes a delta from a peer: counts of a strict rule admitted
	// outside the log, which the leader brings into it.
	Received(d *counter.Delta)
	// MembersChanged tells strict mode the node's live peers changed.
	MembersChanged()
	// Member returns the Raft address and server ID the node gossips;
	// both empty while it runs no group.
	Member() (raftAddr, raftID string)
	// Keys returns how many keys the log's state machine holds on this
	// node for rule, a limit of a strict rule: 0 while it runs no group.
	Keys(rule string) int
	// Stop shuts Raft down, which answers every check waiting on it, and
	// stops strict mode's loops.
	Stop()
	// Close releases the transport and stores; Stop has run.
	Close()
}

// Check is one of the checks Engine.AllowAll or Engine.AllowEach decides
// together.
type Check struct {
	Rule, Key string
	Hits      int64
}

// Counters are strict mode's metrics. The node keeps them among its own,
// and cluster.Metrics has a field of each name.
type Counters struct {
	// StrictEntries are the log entries committed while leading, and
	// StrictChecks the checks they held; StrictFailovers are the checks
	// answered by fail_mode for want of a leader.
	StrictEntries, StrictChecks, StrictFailovers atomic.Int64
	// StrictInFlightFailovers are the fail-mode answers given while the
	// check was on its way to a leader that did not answer in time.
	StrictInFlightFailovers atomic.Int64
	// StrictRecoveries are the groups rebuilt from the voters left after a
	// majority restarted without their logs.
	StrictRecoveries atomic.Int64
	// StrictLeaderChanges are the leaders this node saw elected: a leader
	// other than the last it knew, or one after a spell without.
	StrictLeaderChanges atomic.Int64
	// StrictForwarded are the checks this node sent to a leader to decide.
	StrictForwarded atomic.Int64
	// StrictApply is how long the log entries this node committed as
	// leader took from Apply to being applied (nanoseconds).
	StrictApply metric.Histogram
}
