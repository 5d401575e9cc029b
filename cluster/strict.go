package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/raftstore"
	"github.com/sluicehq/sluice/window"
)

// Defaults for strict mode.
const (
	defaultStrictVoters  = 3
	defaultStrictTimeout = time.Second
	// defaultStrictBootstrapWait is five gossip probe intervals: time for a
	// member of a group to ping a node that forgot it, find it restarted
	// and rejoin it (restart_detect.go).
	defaultStrictBootstrapWait = 5 * time.Second
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
	n       *Node
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

// strictPending is checks waiting for their decisions together: one check
// of this node's, or a batch a follower forwarded, which then goes into one
// log entry whole.
type strictPending struct {
	checks []*sluicev1.StrictCheck
	done   chan strictOutcome // buffered: the decider never blocks
	// state is pendingQueued until a batch takes it; a caller whose
	// deadline passes first withdraws it, and then it is known unsent.
	state atomic.Int32
}

const (
	pendingQueued int32 = iota
	pendingTaken
	pendingWithdrawn
)

// take claims p for a batch; false if its caller has withdrawn it.
func (p *strictPending) take() bool { return p.state.CompareAndSwap(pendingQueued, pendingTaken) }

// withdraw takes p back before any batch took it; false if one did.
func (p *strictPending) withdraw() bool {
	return p.state.CompareAndSwap(pendingQueued, pendingWithdrawn)
}

// strictOutcome is a decision per check, or why there are none.
type strictOutcome struct {
	ds  []*sluicev1.StrictDecision
	err error
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

func newStrictGroup(ctx context.Context, n *Node, rules []window.Rule) (*strictGroup, error) {
	g := newGroupShell(n, rules)
	g.id = raftServerID(n.cfg.Name, n.self.Boot, n.cfg.DataDir != "")
	g.started = time.Now()
	if n.store != nil {
		g.logs = raftstore.New(n.store)
	} else {
		st, err := store.Open("", store.WithLogger(n.log))
		if err != nil {
			return nil, fmt.Errorf("sluice: strict log store: %w", err)
		}
		g.logs, g.ownLogs = raftstore.New(st), true
	}
	g.snaps = raft.NewInmemSnapshotStore()
	if n.cfg.DataDir != "" {
		fs, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(n.cfg.DataDir, "raft"), 2, newRaftLogger(n.log))
		if err != nil {
			g.close()
			return nil, fmt.Errorf("sluice: strict snapshots: %w", err)
		}
		g.snaps = fs
	}

	if n.cfg.BindAddr == "" {
		// A lone node needs no network for its log.
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(n.cfg.Name))
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
	if n.cfg.BindAddr == "" {
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
func newGroupShell(n *Node, rules []window.Rule) *strictGroup {
	_, byName := strictRules(rules)
	g := &strictGroup{n: n, deadSeen: map[raft.ServerID]time.Time{}, down: make(chan struct{}), changes: newChanges(),
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
	rc.LeaderLeaseTimeout = 250 * time.Millisecond
	rc.CommitTimeout = 5 * time.Millisecond
	rc.MaxAppendEntries = 256
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = 16384
	rc.TrailingLogs = 4096
	rc.Logger = newRaftLogger(g.n.log)
	if g.n.cfg.BindAddr == "" {
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
	fsm.overAdmit = g.n.cfg.strictOverAdmit
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
	g.watch = watchRaft(r, g.changes)
	return nil
}

// listen opens the Raft TCP transport on the gRPC host, on RaftAddr's port
// or a free one.
func (g *strictGroup) listen() error {
	n := g.n
	bind := n.cfg.RaftAddr
	if bind == "" {
		host, _, err := net.SplitHostPort(n.server.addr())
		if err != nil {
			return fmt.Errorf("sluice: raft address: %w", err)
		}
		bind = net.JoinHostPort(host, "0")
	}
	lis, err := n.listen(context.Background(), bind)
	if err != nil {
		return fmt.Errorf("sluice: raft_addr: %w", err)
	}
	advertise := lis.Addr()
	if n.cfg.RaftAdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", n.cfg.RaftAdvertiseAddr)
		if err != nil {
			lis.Close()
			return fmt.Errorf("sluice: raft_advertise_addr: %w", err)
		}
		advertise = a
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &raftStream{lis: lis, advertise: advertise, network: n.network()},
		MaxPool: 8, Timeout: 2 * time.Second, Logger: newRaftLogger(n.log),
		// No pipelining: hashicorp/raft's pipeline can deadlock after a
		// stale-term answer (a replication goroutine parked on a response
		// no one reads), which stalls a follower and hangs Shutdown. Group
		// commit already packs many checks into each entry, so one append
		// in flight per follower costs little.
		MaxRPCsInFlight: 1,
		// Voters are dialled where gossip says they are now, not where the
		// log last recorded them: a voter restarted on another port (the
		// default picks a free one) is reachable before a leader exists to
		// record its new address, as after a whole-fleet restart.
		ServerAddressProvider: gossipRaftAddrs{g},
	})
	g.trans, g.closer, g.addr = trans, trans, advertise.String()
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
		g.n.log.Warn("strict bootstrap failed", "err", err)
	default:
		g.hasGroup.Store(true)
		g.n.log.Info("strict group bootstrapped", "raft_addr", g.addr)
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
			g.n.log.Warn("strict raft shutdown", "err", err)
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
	for {
		changed := g.changes.changed()
		if addr, _ := g.raft.LeaderWithID(); addr != "" && (!g.isVoter() || g.fsm.hasRules(*g.rules.Load())) {
			return
		}
		if g.n.members != nil && !g.inGroup() && len(g.liveMembers()) == 1 {
			// Alone and in no group: no leader will come before a peer
			// does, or before this node starts a group (maybeBootstrap).
			g.n.log.Info("no strict group yet; strict rules answer by their fail_mode until one forms",
				"alone_for_at_most", g.aloneGrace())
			return
		}
		select {
		case <-ctx.Done():
			g.n.log.Warn("no strict leader yet; strict rules answer by their fail_mode until one is elected")
			return
		case <-g.down:
			return
		case <-changed:
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
		d := g.n.cfg.strictRetry
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

// check decides one strict check: through the log when a leader answers in
// time, else as the rule's fail_mode says. The fail-mode answer comes before
// the caller's deadline (or the default strict timeout), not after it.
func (g *strictGroup) check(ctx context.Context, rule window.Rule, key string, hits int64) (window.Decision, error) {
	a := g.checkAt(ctx, rule, key, hits)
	return a.d, a.err
}

// strictAnswer is what checkAt found for one check.
type strictAnswer struct {
	d   window.Decision
	at  int64 // the log's time of a strict decision (Unix nanoseconds); 0 otherwise
	err error
	// sent marks a fail-mode answer given while the check was on its way
	// to the leader: the log may yet count it. Tests model such checks as
	// maybe applied.
	sent bool
}

// giveUpMargin is the share of a caller's remaining time kept back to
// answer by the fail mode, within [minGiveUpMargin, maxGiveUpMargin]: enough
// to decide locally and send the answer before the caller stops listening.
const (
	giveUpMargin    = 10 // percent
	minGiveUpMargin = 2 * time.Millisecond
	maxGiveUpMargin = 250 * time.Millisecond
)

// giveUpAt returns when a check must stop waiting for the leader so that its
// fail-mode answer still reaches the caller: a margin before ctx's deadline,
// or the strict timeout from now when ctx has none.
func giveUpAt(ctx context.Context, now time.Time, timeout time.Duration) time.Time {
	deadline, ok := ctx.Deadline()
	if !ok {
		return now.Add(timeout)
	}
	margin := min(max(deadline.Sub(now)*giveUpMargin/100, minGiveUpMargin), maxGiveUpMargin)
	return deadline.Add(-margin)
}

// checkAt is check with the log's time of a strict decision, and whether a
// fail-mode answer came while the check was in flight.
func (g *strictGroup) checkAt(ctx context.Context, rule window.Rule, key string, hits int64) strictAnswer {
	wait, cancel := context.WithDeadline(ctx, giveUpAt(ctx, time.Now(), g.n.cfg.StrictTimeout))
	defer cancel()
	failMode := func(sent bool) strictAnswer {
		d, err := g.failMode(rule, key, hits)
		return strictAnswer{d: d, err: err, sent: sent}
	}
	p := &strictPending{
		checks: []*sluicev1.StrictCheck{{Id: g.n.self.Boot ^ g.nextID.Add(1), Rule: rule.Name, Key: key, Hits: hits}},
		done:   make(chan strictOutcome, 1),
	}
	for {
		changed := g.changes.changed()
		q := g.fwd
		if g.raft.State() == raft.Leader {
			q = g.lead
		} else if g.leader(wait) == "" {
			// No leader known: wait for an election, then fail over. A
			// voter's Raft reports one (changes); a node that does not
			// vote learns of it only by asking again.
			if !g.pause(wait, changed, g.isVoter()) {
				return failMode(false)
			}
			continue
		}
		select {
		case q <- p:
		case <-wait.Done():
			return failMode(false)
		}
		var out strictOutcome
		select {
		case out = <-p.done:
		case <-wait.Done():
			if p.withdraw() {
				// Still queued: it was never sent, so the fail mode answers.
				return failMode(false)
			}
			// An answer may have arrived together with the deadline.
			select {
			case out = <-p.done:
			default:
				if ctx.Err() != nil {
					return strictAnswer{err: fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())}
				}
				// The leader has not answered in time: the caller still
				// gets the fail mode's answer, though the log may count
				// the check too.
				g.n.metrics.StrictInFlightFailovers.Add(1)
				return failMode(true)
			}
		}
		switch {
		case out.err == nil:
			sd := out.ds[0]
			d, err := fromStrict(sd)
			if errors.Is(err, ErrUnknownRule) {
				// The log does not know the rule yet: the leader has not
				// taken this node's configuration. Answer as without a leader.
				return failMode(false)
			}
			return strictAnswer{d: d, at: sd.GetDecidedAt(), err: err}
		case errors.Is(out.err, errNoLeader):
			// Nothing was appended: try again when leadership changes or
			// after the retry pause (the leader Raft names may be one that
			// gRPC cannot reach, and then no change comes), or fail over at
			// the deadline.
			if !g.pause(wait, changed, false) {
				return failMode(false)
			}
			p.done = make(chan strictOutcome, 1)
			p.state.Store(pendingQueued)
			continue
		}
		return strictAnswer{err: out.err}
	}
}

// errNoLeader means a check was not appended anywhere: safe to retry.
var errNoLeader = errors.New("no strict leader")

// fromStrict reads a decision of the log; an error is the one the deciding
// node had (strictErr).
func fromStrict(d *sluicev1.StrictDecision) (window.Decision, error) {
	if err := strictErr(d); err != nil {
		return window.Decision{}, err
	}
	return window.Decision{Allowed: d.GetAllowed(), Limit: d.GetLimit(), Remaining: d.GetRemaining(),
		ResetAfter: time.Duration(d.GetResetAfterNs()), RetryAfter: time.Duration(d.GetRetryAfterNs()),
		Path: window.PathStrict, At: d.GetDecidedAt()}, nil
}

// failMode answers a check no leader could decide in time.
func (g *strictGroup) failMode(rule window.Rule, key string, hits int64) (window.Decision, error) {
	g.n.metrics.StrictFailovers.Add(1)
	switch rule.FailMode {
	case window.FailOpen:
		return window.Decision{Allowed: true, Limit: rule.Count, Remaining: rule.Count, Path: window.PathFailOpen, At: g.n.now()}, nil
	case window.FailClosed:
		return window.Decision{Limit: rule.Count, RetryAfter: g.n.cfg.StrictTimeout, Path: window.PathFailClosed, At: g.n.now()}, nil
	}
	// From the node's own view, not from zero: it holds what this node and
	// the peers it reaches admitted outside the log, and the counts the
	// rule had when it turned strict.
	d, err := g.n.replica.Allow(g.n.now(), rule.Name, key, hits)
	if d.Allowed && hits > 0 {
		g.n.changed.Store(true)
		g.outside.Store(true)
	}
	d.Path = window.PathFailLocal
	return d, err
}

// batchLoop packs the checks that arrive while earlier entries are in
// flight into the next log entry: group commit.
func (g *strictGroup) batchLoop(ctx context.Context) { pump(ctx, g.lead, g.commit) }

// pump hands the checks queued on q to send in batches: whatever has queued
// by the time one of strictInFlight sends is free goes in the next one. When
// ctx ends it answers what is still queued as never appended.
func pump(ctx context.Context, q chan *strictPending, send func([]*strictPending)) {
	slots := make(chan struct{}, strictInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		for {
			select {
			case p := <-q:
				if p.take() {
					p.done <- strictOutcome{err: errNoLeader}
				}
			default:
				return
			}
		}
	}()
	for {
		var first *strictPending
		select {
		case <-ctx.Done():
			return
		case first = <-q:
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			if first.take() {
				first.done <- strictOutcome{err: errNoLeader}
			}
			return
		}
		if !first.take() {
			<-slots // withdrawn by its caller
			continue
		}
		batch := drain(first, q)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			send(batch)
		}()
	}
}

// drain takes first and whatever else is already queued, up to a batch of
// checks (a forwarded batch is never split).
func drain(first *strictPending, q chan *strictPending) []*strictPending {
	batch, n := []*strictPending{first}, len(first.checks)
	for n < strictMaxBatch {
		select {
		case p := <-q:
			if p.take() {
				batch, n = append(batch, p), n+len(p.checks)
			}
		default:
			return batch
		}
	}
	return batch
}

// checksOf lists the checks of a batch, in order.
func checksOf(batch []*strictPending) []*sluicev1.StrictCheck {
	var out []*sluicev1.StrictCheck
	for _, p := range batch {
		out = append(out, p.checks...)
	}
	return out
}

// answer hands each pending its share of decisions, which are in the order
// of checksOf(batch).
func answer(batch []*strictPending, ds []*sluicev1.StrictDecision) {
	for _, p := range batch {
		p.done <- strictOutcome{ds: ds[:len(p.checks):len(p.checks)]}
		ds = ds[len(p.checks):]
	}
}

// commit appends one entry and hands each check its decision.
func (g *strictGroup) commit(batch []*strictPending) {
	checks := checksOf(batch)
	data, err := proto.Marshal(&sluicev1.StrictBatch{Now: g.n.now(), Checks: checks})
	if err != nil {
		failAll(batch, err)
		return
	}
	f := g.raft.Apply(data, 0)
	if err := g.awaitApply(f); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			failAll(batch, errNoLeader) // refused before it was appended
		default:
			failAll(batch, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err))
		}
		return
	}
	res, ok := f.Response().(*strictResult)
	if !ok || res.err != nil || len(res.decisions) != len(checks) {
		failAll(batch, fmt.Errorf("sluice: strict entry %d was not decided", f.Index()))
		return
	}
	g.n.metrics.StrictEntries.Add(1)
	g.n.metrics.StrictChecks.Add(int64(len(checks)))
	answer(batch, res.decisions)
}

func failAll(batch []*strictPending, err error) {
	for _, p := range batch {
		p.done <- strictOutcome{err: err}
	}
}

// forwardLoop sends the checks of a following node to the leader, as many
// per call as are waiting.
func (g *strictGroup) forwardLoop(ctx context.Context) {
	pump(ctx, g.fwd, func(batch []*strictPending) { g.forward(ctx, batch) })
}

// forward asks the leader to decide a batch.
func (g *strictGroup) forward(ctx context.Context, batch []*strictPending) {
	id := g.leader(ctx)
	p := g.n.peers.byRaftID(id)
	if p == nil || p.conn.GetState() == connectivity.TransientFailure || p.conn.GetState() == connectivity.Shutdown {
		// Not sent: the leader is unknown or cannot be reached.
		g.leaderHint.Store("")
		failAll(batch, errNoLeader)
		return
	}
	ds, err := g.forwardTo(ctx, p, checksOf(batch))
	if err != nil {
		failAll(batch, err)
		return
	}
	answer(batch, ds)
}

// forwardTo asks peer p, which this node takes for the leader, to decide
// checks, and returns a decision per check. The error is errNoLeader when
// nothing was appended (p does not lead, or the call never reached it), so
// that the checks may go elsewhere, and ErrOutcomeUnknown when the log may
// have decided them.
func (g *strictGroup) forwardTo(ctx context.Context, p *peer, checks []*sluicev1.StrictCheck) ([]*sluicev1.StrictDecision, error) {
	callCtx, cancel := context.WithTimeout(ctx, g.n.cfg.StrictTimeout)
	defer cancel()
	// reached is filled in once the call had a stream to p: gRPC sets a
	// call's peer after the call ends, and only if a transport stream was
	// created for it (clientStream.finish runs the "after" hooks only
	// then). A stream is created only once a connection is up, and before
	// the request's headers are queued (http2Client.NewStream fails before
	// it queues them), so a call that ends with no peer never sent a byte
	// of the request: not when the connection could not be made, nor when
	// the call's deadline passed while it waited for one. gRPC's own
	// transparent retry does not blur this, for it retries only attempts
	// the server never processed. A call with a peer may have reached the
	// leader, whatever its status says.
	var reached grpcpeer.Peer
	resp, err := sluicev1.NewStrictClient(p.conn).Forward(callCtx,
		&sluicev1.ForwardRequest{Checks: checks, Redirect: true}, grpc.Peer(&reached))
	switch {
	case err != nil && (reached.Addr == nil || status.Code(err) == codes.FailedPrecondition):
		// Never sent, or the leader's own word that it appended nothing
		// (and an older node's way to say it does not lead).
		g.leaderHint.Store("")
		return nil, errNoLeader
	case err != nil:
		return nil, fmt.Errorf("%w: forwarded to %s: %w", ErrOutcomeUnknown, p.info.raftID, err)
	case resp.GetNotLeader() != nil:
		g.noteLeader(resp.GetNotLeader())
		return nil, errNoLeader
	case len(resp.GetDecisions()) != len(checks):
		return nil, fmt.Errorf("%w: %s answered %d of %d checks", ErrOutcomeUnknown, p.info.raftID, len(resp.GetDecisions()), len(checks))
	}
	return resp.GetDecisions(), nil
}

// noteLeader keeps the leader a member that does not lead named, as a hint
// for a node whose Raft does not know one. A member naming this node is
// behind: it is not kept.
func (g *strictGroup) noteLeader(nl *sluicev1.NotLeader) string {
	id := nl.GetLeader()
	if id == string(g.id) {
		id = ""
	}
	g.leaderHint.Store(id)
	return id
}

// leader returns the strict leader's server ID: the one Raft knows of, or,
// on a node that does not vote and so hears no heartbeats, the one a voter
// named.
func (g *strictGroup) leader(ctx context.Context) string {
	if _, id := g.raft.LeaderWithID(); id != "" {
		return string(id)
	}
	if hint, _ := g.leaderHint.Load().(string); hint != "" {
		return hint
	}
	if g.isVoter() {
		return "" // an election is under way; wait for it
	}
	// Ask the members that take part: the leader answers an empty Forward,
	// another member names the leader it knows.
	for _, p := range g.n.peers.list() {
		if p.info.raftAddr == "" {
			continue
		}
		nl, err := probe(ctx, p, 200*time.Millisecond)
		switch {
		case err != nil:
		case nl == nil:
			g.leaderHint.Store(p.info.raftID)
			return p.info.raftID
		default:
			if id := g.noteLeader(nl); id != "" {
				return id
			}
		}
	}
	return ""
}

// probe sends peer p an empty Forward, within timeout, and returns what it
// knows of the leader: nil if p leads. An error is a peer that could not be
// asked, or that predates NotLeader and answered FAILED_PRECONDITION, which
// says only that it does not lead.
func probe(ctx context.Context, p *peer, timeout time.Duration) (*sluicev1.NotLeader, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := sluicev1.NewStrictClient(p.conn).Forward(ctx, &sluicev1.ForwardRequest{Redirect: true})
	if err != nil {
		return nil, err
	}
	return resp.GetNotLeader(), nil
}

// leaderIsPrefix starts the message of a follower's FAILED_PRECONDITION
// answer to a node that predates NotLeader, which reads the leader's server
// ID from it: it follows, quoted.
const leaderIsPrefix = "not the strict leader; the leader is "

// electingMessage is a voter's answer, to a node that predates NotLeader,
// while its group elects a leader: a group exists, so no one may bootstrap
// another beside it.
const electingMessage = "not the strict leader; this node's group is electing one"

// noLeaderMessage is the answer, to a node that predates NotLeader, of a
// node in no group and knowing no leader: the one answer that lets such a
// node bootstrap a group.
const noLeaderMessage = leaderIsPrefix + `""`

const unknownMessage = "outcome unknown"

// notLeader answers a Forward this node does not lead for: in the response
// when the caller asked for that (redirect), else as nodes did before
// NotLeader, with FAILED_PRECONDITION and a message the caller parses.
func notLeader(req *sluicev1.ForwardRequest, leader raft.ServerID, inGroup bool) (*sluicev1.ForwardResponse, error) {
	switch {
	case req.GetRedirect():
		return &sluicev1.ForwardResponse{NotLeader: &sluicev1.NotLeader{Leader: string(leader), InGroup: inGroup}}, nil
	case leader == "" && inGroup:
		return nil, status.Error(codes.FailedPrecondition, electingMessage)
	}
	return nil, status.Errorf(codes.FailedPrecondition, leaderIsPrefix+"%q", leader)
}

// leaderHandle decides forwarded checks while this node leads, in one log
// entry.
func (g *strictGroup) leaderHandle(ctx context.Context, req *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
	if g.raft.State() != raft.Leader {
		_, id := g.raft.LeaderWithID()
		return notLeader(req, id, g.inGroup())
	}
	if len(req.GetChecks()) == 0 {
		return &sluicev1.ForwardResponse{}, nil
	}
	p := &strictPending{checks: req.GetChecks(), done: make(chan strictOutcome, 1)}
	select {
	case g.lead <- p:
	case <-ctx.Done():
		return nil, status.Error(codes.FailedPrecondition, "the leader is busy; nothing was appended")
	}
	var out strictOutcome
	select {
	case out = <-p.done:
	case <-ctx.Done():
		if p.withdraw() {
			return nil, status.Error(codes.FailedPrecondition, "the leader is busy; nothing was appended")
		}
		return nil, status.Error(codes.Unavailable, unknownMessage)
	}
	switch {
	case out.err == nil:
		return &sluicev1.ForwardResponse{Decisions: out.ds}, nil
	case errors.Is(out.err, errNoLeader):
		// Nothing of the request was appended: the caller may retry.
		return nil, status.Error(codes.FailedPrecondition, "leadership moved")
	}
	return nil, status.Error(codes.Unavailable, unknownMessage)
}

// raftStream is raft's StreamLayer over a listener of the node's network.
type raftStream struct {
	lis       net.Listener
	advertise net.Addr
	network   Network
}

func (s *raftStream) Accept() (net.Conn, error) { return s.lis.Accept() }
func (s *raftStream) Close() error              { return s.lis.Close() }
func (s *raftStream) Addr() net.Addr            { return s.advertise }
func (s *raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return dialTimeout(s.network, string(address), timeout)
}
