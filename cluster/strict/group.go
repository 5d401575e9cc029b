package strict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/raftstore"
	"github.com/sluicehq/sluice/window"
)

// Timings and sizes of strict mode.
const (
	// strictInFlight is how many log entries the leader keeps in flight;
	// checks that arrive meanwhile wait for the next entry (group commit).
	// One is best: fewer, larger entries cost less per check than more
	// entries in flight save in waiting.
	strictInFlight = 1
	// strictMaxBatch bounds the checks in one log entry.
	strictMaxBatch = 4096
	// loneElection is how long a node without a cluster waits before it
	// elects itself leader of its own strict group.
	loneElection = 50 * time.Millisecond
	// electionTimeout is how long a follower hears no leader before it
	// campaigns: a failover takes about this long on a LAN.
	electionTimeout = 500 * time.Millisecond
	// deadVoterGrace is how long a voter must stay dead before the leader
	// promotes a live member in its place.
	deadVoterGrace = 5 * time.Second
	// strictRetryPause is how long a check waits before it asks again
	// where no event says when to: after a forward the leader Raft names
	// refused or could not be sent, and, on a node that does not vote,
	// between rounds of asking the members who leads. Raft tells a voter
	// of an election (changes); nothing tells it that a leader's gRPC
	// address answers again, or a non-voter that a leader was elected.
	strictRetryPause = 20 * time.Millisecond
)

// strictGroup is this node's part in strict mode: a Raft replica of the
// strict rules' exact counter table, a batcher that packs checks into log
// entries while it leads, and a forwarder that sends checks to the leader
// while it follows.
type strictGroup struct {
	e       *engine
	fsm     *strictFSM
	raft    *raft.Raft
	trans   raft.Transport
	closer  io.Closer // the transport, when it has a socket
	logs    *raftstore.Store
	ownLogs bool
	snaps   raft.SnapshotStore
	addr    string // the Raft address peers dial
	id      raft.ServerID
	started time.Time // when this node's strict mode started
	// view and viewSince are the members maybeBootstrap last saw, and
	// since when; only the reconcile loop touches them.
	view      string
	viewSince time.Time

	// rules are the strict rules of this node's configuration, by name;
	// the leader brings the log's rules in line with its own (syncRules).
	rules atomic.Pointer[map[string]window.Rule]

	nextID     atomic.Uint64
	leaderHint atomic.Value        // string: the leader a voter named, for a node that does not vote
	lead       chan *strictPending // checks for the log, while leading
	fwd        chan *strictPending // checks for the leader, while following

	mu       sync.Mutex
	deadSeen map[raft.ServerID]time.Time // voters not alive, since when

	// changes wakes whoever waits for a leader, for the log's rules or for
	// the voter set to need work: Raft's observations (watch), the state
	// machine's rule changes and membership changes notify it.
	changes *changes
	watch   *raftWatch

	hasGroup atomic.Bool // this node bootstrapped a group, or its log holds one
	// down is closed once Raft has shut down (shutdown), so that no one
	// waits on a future it will never answer.
	down     chan struct{}
	downOnce sync.Once
	// halt stops run's loops when the group hands over to a successor
	// (recoverFrom); ran is closed once they have stopped.
	halt     chan struct{}
	haltOnce sync.Once
	ran      chan struct{}
	// outside is set when counts of a strict rule change outside the log:
	// a fail-local admission here, or a peer's report. The leader then
	// brings them into the log (importOutside).
	outside atomic.Bool
}

// strictRules returns the strict rules among rules, in order and by name.
func strictRules(rules []window.Rule) ([]window.Rule, map[string]window.Rule) {
	var list []window.Rule
	byName := map[string]window.Rule{}
	for _, r := range rules {
		if r.IsStrict() {
			list = append(list, r)
			byName[r.Name] = r
		}
	}
	return list, byName
}

// newStrictGroup starts e's node's part in strict mode for rules: its log
// store, snapshots, transport and Raft; a lone node bootstraps its group at
// once. On error it has released all it opened.
func newStrictGroup(e *engine, rules []window.Rule) (*strictGroup, error) {
	g := newGroupShell(e, rules)
	g.id = raftServerID(e.set.Name, e.self.Boot, e.set.DataDir != "")
	g.started = time.Now()
	if st := e.h.Store(); st != nil {
		g.logs = raftstore.New(st)
	} else {
		st, err := store.Open("", store.WithLogger(e.log))
		if err != nil {
			return nil, fmt.Errorf("sluice: strict log store: %w", err)
		}
		g.logs, g.ownLogs = raftstore.New(st), true
	}
	g.snaps = raft.NewInmemSnapshotStore()
	if e.set.DataDir != "" {
		fs, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(e.set.DataDir, "raft"), 2, newRaftLogger(e.log))
		if err != nil {
			g.close()
			return nil, fmt.Errorf("sluice: strict snapshots: %w", err)
		}
		g.snaps = fs
	}

	if !e.set.Clustered {
		// A lone node needs no network for its log.
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(e.set.Name))
		g.trans, g.addr = trans, string(addr)
	} else {
		if err := g.listen(); err != nil {
			g.close()
			return nil, err
		}
	}
	if err := g.openRaft(nil); err != nil {
		g.close()
		return nil, err
	}
	if !e.set.Clustered {
		has, err := raft.HasExistingState(g.logs, g.logs, g.snaps)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("sluice: strict raft: %w", err)
		}
		if !has {
			g.bootstrap()
		}
	}
	return g, nil
}

// newGroupShell is a group with its queues and rules, before it has stores,
// a transport or Raft.
func newGroupShell(e *engine, rules []window.Rule) *strictGroup {
	_, byName := strictRules(rules)
	g := &strictGroup{e: e, deadSeen: map[raft.ServerID]time.Time{}, down: make(chan struct{}), changes: newChanges(),
		halt: make(chan struct{}), ran: make(chan struct{}),
		lead: make(chan *strictPending, strictMaxBatch), fwd: make(chan *strictPending, strictMaxBatch)}
	g.rules.Store(&byName)
	return g
}

// raftConfig is the group's Raft configuration.
func (g *strictGroup) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = g.id
	// Fail over within a couple of seconds on a LAN.
	rc.HeartbeatTimeout = electionTimeout
	rc.ElectionTimeout = electionTimeout
	// A leader that hears from no quorum for its lease steps down, and its
	// checks in flight end with their outcome unknown. The lease is as
	// long as Raft allows, the heartbeat timeout: a leader starved of CPU
	// for a quarter of a second (a loaded machine, a long GC pause) is not
	// cut off, and one that truly is can commit nothing meanwhile anyway.
	rc.LeaderLeaseTimeout = electionTimeout
	rc.CommitTimeout = 5 * time.Millisecond
	rc.MaxAppendEntries = 256
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = 16384
	rc.TrailingLogs = 4096
	rc.Logger = newRaftLogger(g.e.log)
	if !g.e.set.Clustered {
		// A lone node has no peer to hear from: it need not wait long
		// before electing itself, and answers by its fail mode until then.
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = loneElection, loneElection, loneElection
	}
	return rc
}

// openRaft starts Raft on the group's stores and transport, first forcing
// the stores to configuration recoverTo when it is set (recoverFrom).
func (g *strictGroup) openRaft(recoverTo *raft.Configuration) error {
	rc := g.raftConfig()
	if recoverTo != nil {
		// RecoverCluster leaves the state machine it replays into unusable.
		scratch, err := newStrictFSM(nil)
		if err != nil {
			return err
		}
		if err := raft.RecoverCluster(rc, scratch, g.logs, g.logs, g.snaps, g.trans, *recoverTo); err != nil {
			return fmt.Errorf("sluice: strict recovery: %w", err)
		}
	}
	// The state machine starts with no rules: every replica learns them from
	// the log, where the leader writes its own (syncRules).
	fsm, err := newStrictFSM(nil)
	if err != nil {
		return err
	}
	fsm.overAdmit = g.e.mode.overAdmit
	fsm.onRules = g.changes.notify
	// The leader reads back every entry it just wrote to replicate it: a
	// cache in front of the store saves those reads.
	cached, err := raft.NewLogCache(1024, g.logs)
	if err != nil {
		return fmt.Errorf("sluice: strict log cache: %w", err)
	}
	r, err := raft.NewRaft(rc, fsm, cached, g.logs, g.snaps, g.trans)
	if err != nil {
		return fmt.Errorf("sluice: strict raft: %w", err)
	}
	g.fsm, g.raft = fsm, r
	g.watch = watchRaft(r, g.changes, &g.e.c.StrictLeaderChanges)
	return nil
}

// bootstrap starts a new group with this node as its only voter; the leader
// adds the others as they come (reconcile).
func (g *strictGroup) bootstrap() {
	err := g.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
		ID: g.id, Address: raft.ServerAddress(g.addr), Suffrage: raft.Voter}}}).Error()
	switch {
	case errors.Is(err, raft.ErrCantBootstrap):
		// The log already holds a group: this node waits to be added back
		// rather than trying again every tick.
		g.hasGroup.Store(true)
	case err != nil:
		g.e.log.Warn("strict bootstrap failed", "err", err)
	default:
		g.hasGroup.Store(true)
		g.e.log.Info("strict group bootstrapped", "raft_addr", g.addr)
	}
}

// run drives the batcher, the forwarder and, in a cluster, the voter set.
func (g *strictGroup) run(ctx context.Context) {
	defer close(g.ran)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-g.halt:
			cancel()
		case <-ctx.Done():
		}
	})
	wg.Go(func() { g.batchLoop(ctx) })
	wg.Go(func() { g.forwardLoop(ctx) })
	wg.Go(func() { g.reconcileLoop(ctx) })
	wg.Wait()
}

// shutdown stops Raft and its watch, and then releases everyone waiting on
// its futures or its changes.
func (g *strictGroup) shutdown() {
	if g.raft != nil {
		if err := g.raft.Shutdown().Error(); err != nil {
			g.e.log.Warn("strict raft shutdown", "err", err)
		}
	}
	g.downOnce.Do(func() {
		g.watch.stop()
		close(g.down)
	})
}

// awaitApply waits for an Apply future, or for Raft's shutdown. Raft does
// not answer every future queued when it shuts down (with BatchApplyCh,
// Apply returns once the future is buffered, and nothing drains the buffer
// at shutdown), and a check must not wait on one forever: it is told the
// outcome is unknown instead. The goroutine waiting on such a future is
// left behind; there are at most strictInFlight of them, once, at shutdown.
func (g *strictGroup) awaitApply(f raft.ApplyFuture) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		return err
	case <-g.down:
		select {
		case err := <-errc:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

func (g *strictGroup) close() {
	g.shutdown()
	if g.closer != nil {
		g.closer.Close()
	}
	if g.ownLogs && g.logs != nil {
		g.logs.Close()
	}
}

// waitLeader returns once the group has a leader and, on a voter, once the
// log holds this node's strict rules; or when ctx ends. A node should not
// serve strict checks before it can reach a leader that knows them. It
// looks again at each change (Raft's leader or state, the log's rules, the
// live members): nothing it waits for comes without one.
func (g *strictGroup) waitLeader(ctx context.Context) {
	// A node outside the group's configuration hears no heartbeat, so its
	// Raft names no leader however long it waits: it asks the members
	// that take part, as its forwarded checks do, again and again, since
	// an election elsewhere changes nothing it watches.
	ask := 50 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		changed := g.changes.changed()
		if addr, _ := g.raft.LeaderWithID(); addr != "" && (!g.isVoter() || g.fsm.hasRules(*g.rules.Load())) {
			return
		}
		var again <-chan time.Time
		if !g.isVoter() && len(g.liveMembers()) > 1 {
			if g.leader(ctx) != "" {
				return
			}
			timer.Reset(ask)
			again, ask = timer.C, min(2*ask, time.Second)
		}
		if g.e.set.Clustered && !g.inGroup() && len(g.liveMembers()) == 1 {
			// Alone and in no group: no leader will come before a peer
			// does, or before this node starts a group (maybeBootstrap).
			g.e.log.Info("no strict group yet; strict rules answer by their fail_mode until one forms",
				"alone_for_at_most", g.aloneGrace())
			return
		}
		select {
		case <-ctx.Done():
			g.e.log.Warn("no strict leader yet; strict rules answer by their fail_mode until one is elected")
			return
		case <-g.down:
			return
		case <-changed:
		case <-again:
		}
	}
}

// pause waits, within wait, for a reason to ask for a leader again: a
// change (changed, taken before the state was read), or, unless
// untilChange, the retry pause. It returns false once wait ends or the
// group has shut down: the fail mode answers then.
func (g *strictGroup) pause(wait context.Context, changed <-chan struct{}, untilChange bool) bool {
	var retry <-chan time.Time
	if !untilChange {
		d := g.e.mode.retry
		if d <= 0 {
			d = strictRetryPause
		}
		t := time.NewTimer(d)
		defer t.Stop()
		retry = t.C
	}
	select {
	case <-wait.Done():
		return false
	case <-g.down:
		return false
	case <-changed:
	case <-retry:
	}
	return true
}

// inGroup reports whether this node's log holds a group's configuration.
func (g *strictGroup) inGroup() bool {
	cf := g.raft.GetConfiguration()
	return cf.Error() == nil && len(cf.Configuration().Servers) > 0
}

// isVoter reports whether this node votes in the group.
func (g *strictGroup) isVoter() bool {
	cf := g.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == g.id {
			return true
		}
	}
	return false
}
