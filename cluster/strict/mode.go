package strict

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// Mode is strict mode, for cluster.Config.Strict: a node whose Config.Strict
// is Mode{} may have strict rules (SyncInterval window.Strict), which it
// decides through a Raft log. The zero value is ready to use. Strict mode's
// settings are the node's: cluster.Config's StrictVoters, StrictTimeout,
// StrictBootstrapWait, RaftAddr and RaftAdvertiseAddr.
type Mode struct {
	// overAdmit, set only by tests, makes the strict state machine admit
	// that many hits past the count: a deliberately broken FSM that the
	// linearizability checker must catch.
	overAdmit int64
	// retry, set only by tests, replaces strictRetryPause: a test that
	// sets it to hours shows a check waits for no such pause.
	retry time.Duration
	// opened, set only by tests, is handed each engine Open makes.
	opened func(*engine)
}

// Open starts strict mode for the node h: it registers the node's Strict
// gRPC service, through which other nodes forward checks to a leader and
// find it. No Raft group runs until the node's rules include a strict one.
// A node calls it from cluster.Start; nothing else needs to.
func (m Mode) Open(h strictapi.Host) (strictapi.Engine, error) {
	ctx, cancel := context.WithCancel(context.Background())
	e := &engine{mode: m, h: h, set: h.Settings(), self: h.Self(), log: h.Logger(), replica: h.Replica(),
		c: h.Counters(), ctx: ctx, cancel: cancel}
	h.RegisterService(&sluicev1.Strict_ServiceDesc, &strictService{e: e})
	if m.opened != nil {
		m.opened(e)
	}
	return e, nil
}

var _ strictapi.Mode = Mode{}

// engine is one node's strict mode: the Raft group it runs while it has
// strict rules, and the goroutines that drive the group, which it owns.
type engine struct {
	mode    Mode
	h       strictapi.Host
	set     strictapi.Settings
	self    counter.Incarnation
	log     *slog.Logger
	replica *counter.Replica
	c       *strictapi.Counters

	// group is nil until the node has a strict rule; a group whose
	// majority was lost is replaced by its successor (recoverStrict).
	group atomic.Pointer[strictGroup]

	ctx    context.Context // lives until Stop; the group's loops run in it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the group's loops and a recovery under way

	// mu serialises SetRules, Serve, Stop and the hand-over to a
	// recovered group.
	mu      sync.Mutex
	rules   []window.Rule // the node's rules, as SetRules last gave them
	serving bool          // Serve has run: a new group runs at once
	stopped bool          // Stop has run: no group starts again
}

var _ strictapi.Engine = (*engine)(nil)

// errStopped is SetRules's answer once strict mode has stopped.
var errStopped = errors.New("sluice: strict mode has stopped")

// SetRules gives the group the node's strict rules, starting it when they
// are the first.
func (e *engine) SetRules(_ context.Context, rules []window.Rule) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errStopped
	}
	e.rules = append([]window.Rule(nil), rules...)
	if g := e.group.Load(); g != nil {
		g.setRules(rules)
		return nil
	}
	if !hasStrict(rules) {
		return nil
	}
	g, err := newStrictGroup(e, rules)
	if err != nil {
		return err
	}
	e.group.Store(g)
	if e.serving {
		e.runGroup(g)
	}
	return nil
}

// Serve runs the group, if there is one, and waits within ctx for a leader
// that knows the node's rules: a node should not serve strict checks
// before it can reach one.
func (e *engine) Serve(ctx context.Context) {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.serving = true
	g := e.group.Load()
	if g != nil {
		e.runGroup(g)
	}
	e.mu.Unlock()
	if g != nil {
		g.waitLeader(ctx)
	}
}

// runGroup starts g's loops; e.mu is held.
func (e *engine) runGroup(g *strictGroup) {
	e.wg.Go(func() { g.run(e.ctx) })
}

// Allow decides a check on a strict rule through the group.
func (e *engine) Allow(ctx context.Context, rule, key string, hits int64) (window.Decision, bool, error) {
	g := e.group.Load()
	if g == nil {
		return window.Decision{}, false, nil
	}
	r, ok := (*g.rules.Load())[rule]
	if !ok {
		return window.Decision{}, false, nil
	}
	if err := e.replica.Check(rule, key, hits); err != nil {
		return window.Decision{}, true, err
	}
	d, err := g.check(ctx, r, key, hits)
	return d, true, err
}

// AllowAll decides checks on strict rules all or nothing.
func (e *engine) AllowAll(ctx context.Context, checks []strictapi.Check) ([]window.Decision, bool, error) {
	return e.allowRun(ctx, checks, true)
}

// AllowEach decides checks on strict rules each on its own, in one run of
// the log.
func (e *engine) AllowEach(ctx context.Context, checks []strictapi.Check) ([]window.Decision, bool, error) {
	return e.allowRun(ctx, checks, false)
}

// allowRun decides checks in one run of the log, all or nothing if joined.
func (e *engine) allowRun(ctx context.Context, checks []strictapi.Check, joined bool) ([]window.Decision, bool, error) {
	g := e.group.Load()
	if g == nil {
		return nil, false, nil
	}
	rules := *g.rules.Load()
	parts := make([]strictPart, len(checks))
	for i, c := range checks {
		r, ok := rules[c.Rule]
		if !ok {
			return nil, false, nil
		}
		parts[i] = strictPart{rule: r, key: c.Key, hits: c.Hits}
	}
	for _, c := range checks {
		if err := e.replica.Check(c.Rule, c.Key, c.Hits); err != nil {
			return nil, true, err
		}
	}
	a := g.checkRunAt(ctx, parts, joined)
	return a.ds, true, a.err
}

// SyncRules, while this node leads, writes its strict rules into the log.
func (e *engine) SyncRules(ctx context.Context) {
	if g := e.group.Load(); g != nil && g.raft.State() == raft.Leader {
		g.syncRules(ctx)
	}
}

// Received marks the group when a peer's delta carries counts of a rule
// the log decides, for the leader to import.
func (e *engine) Received(d *counter.Delta) {
	g := e.group.Load()
	if g == nil {
		return
	}
	rules := *g.rules.Load()
	for _, rd := range d.Rules {
		if _, ok := rules[rd.Rule]; ok && len(rd.Entries) > 0 {
			g.outside.Store(true)
			return
		}
	}
}

// MembersChanged wakes whoever waits on the members: a group to
// bootstrap, voters to replace, the peers a lone node waits for.
func (e *engine) MembersChanged() {
	if g := e.group.Load(); g != nil {
		g.changes.notify()
	}
}

// Member returns the group's Raft address and this node's server ID in it.
func (e *engine) Member() (string, string) {
	if g := e.group.Load(); g != nil {
		return g.addr, string(g.id)
	}
	return "", ""
}

// Keys returns how many keys the group's state machine holds for rule.
func (e *engine) Keys(rule string) int {
	if g := e.group.Load(); g != nil {
		return g.fsm.keys(rule)
	}
	return 0
}

// Stop shuts the group's Raft down, so that every check and loop waiting
// on one of its futures is answered, and waits for the loops to end.
func (e *engine) Stop() {
	e.mu.Lock()
	e.stopped = true
	e.cancel()
	e.mu.Unlock()
	// A recovery under way sees the cancel under mu: the group is no longer
	// replaced once it has been read here.
	if g := e.group.Load(); g != nil {
		g.shutdown()
	}
	e.wg.Wait()
}

// Close releases the group's transport and stores.
func (e *engine) Close() {
	if g := e.group.Load(); g != nil {
		g.close()
	}
}

// peerByRaftID returns the live peer with the given server ID.
func (e *engine) peerByRaftID(id string) (strictapi.Peer, bool) {
	for _, p := range e.h.Peers() {
		if p.RaftID == id {
			return p, true
		}
	}
	return strictapi.Peer{}, false
}

// hasStrict reports whether any of rules is strict.
func hasStrict(rules []window.Rule) bool {
	for _, r := range rules {
		if r.IsStrict() {
			return true
		}
	}
	return false
}
