package strict

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// Test-only access to strict mode's internals, on real nodes.

// testNode is a running node and its strict mode.
type testNode struct {
	*cluster.Node
	e *engine
}

// group returns the node's strict group, nil while it has none.
func (n *testNode) group() *strictGroup { return n.e.group.Load() }

// start starts a node on cfg with strict mode on: cfg.Strict if it is a
// Mode (a test sets its unexported fields), else Mode{}. The caller closes
// the node.
func start(cfg cluster.Config) (*testNode, error) {
	m, _ := cfg.Strict.(Mode)
	var e *engine
	m.opened = func(opened *engine) { e = opened }
	cfg.Strict = m
	nd, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return &testNode{Node: nd, e: e}, nil
}

// peerNamed returns the node's live peer of the given name; its Conn is nil
// if there is none.
func (n *testNode) peerNamed(name string) strictapi.Peer {
	for _, p := range n.e.h.Peers() {
		if p.Name == name {
			return p
		}
	}
	return strictapi.Peer{}
}

// hasPeer reports whether the node has a live peer of the given server ID.
func (n *testNode) hasPeer(raftID string) bool {
	_, ok := n.e.peerByRaftID(raftID)
	return ok
}

// allowAt is Node.Allow for a strict rule that also returns the log's time
// of the decision (Unix nanoseconds; 0 unless the decision is PathStrict).
// It takes the same steps as Allow: validate, then strictGroup.check.
func (n *testNode) allowAt(ctx context.Context, rule, key string, hits int64) (window.Decision, int64, error) {
	if n.group() == nil {
		return window.Decision{}, 0, fmt.Errorf("%s has no strict rules", n.Name())
	}
	r, ok := (*n.group().rules.Load())[rule]
	if !ok {
		return window.Decision{}, 0, fmt.Errorf("%w %q is not strict", counter.ErrUnknownRule, rule)
	}
	if err := n.e.replica.Check(rule, key, hits); err != nil {
		return window.Decision{}, 0, err
	}
	a := n.group().checkAt(ctx, r, key, hits)
	if a.sent {
		// The log may count a check answered by the fail mode in flight:
		// histories model it as an unknown outcome.
		return a.d, 0, fmt.Errorf("%w: answered %v while in flight", strictapi.ErrOutcomeUnknown, a.d.Path)
	}
	return a.d, a.at, a.err
}

// strictCounts returns the strict state machine's counts of key under rule,
// at the time of the last entry it applied, and that time.
func (n *testNode) strictCounts(rule, key string) (window.Counts, int64) {
	f := n.group().fsm
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.replica.Table(rule)
	if t == nil {
		return window.Counts{}, f.now
	}
	_, view := t.Counts(key, f.now)
	return view, f.now
}

// strictApplied returns the index of the last log entry the node applied.
func (n *testNode) strictApplied() uint64 { return n.group().raft.AppliedIndex() }

// isStrictLeader reports whether the node leads the strict group.
func (n *testNode) isStrictLeader() bool { return n.group().raft.State() == raft.Leader }

// strictLeaderName returns the name of the leader this node knows, or "".
func (n *testNode) strictLeaderName() string {
	_, id := n.group().raft.LeaderWithID()
	return serverName(id)
}

// strictVoters returns the voters of the group as this node sees them.
func (n *testNode) strictVoters() int {
	cf := n.group().raft.GetConfiguration()
	if cf.Error() != nil {
		return 0
	}
	voters := 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	return voters
}

// startStrictCluster starts n nodes on loopback with real memberlist and
// gRPC, strict mode on, every node after the first joining those before
// it; tweak, if set, adjusts each node's configuration before it starts
// (its Strict, a Mode, for the unexported test settings).
func startStrictCluster(t testing.TB, n int, rules []window.Rule, now func() int64, tweak func(*cluster.Config)) []*testNode {
	t.Helper()
	var nodes []*testNode
	for i := range n {
		var join []string
		for _, s := range nodes {
			join = append(join, s.GossipAddr())
		}
		cfg := cluster.Config{
			Name: fmt.Sprintf("node-%d", i), Rules: rules, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", Join: join,
			JoinTimeout: 5 * time.Second, ShutdownTimeout: time.Second, Logger: testLogger(t), Now: clockOf(now),
			StrictBootstrapWait: freshBootstrapWait,
		}
		if tweak != nil {
			tweak(&cfg)
		}
		nd, err := start(cfg)
		if err != nil {
			t.Fatalf("start %s: %v", cfg.Name, err)
		}
		t.Cleanup(func() { nd.Close() })
		nodes = append(nodes, nd)
	}
	waitFor(t, patience, "every node sees every other", func() bool {
		for _, nd := range nodes {
			if nd.Metrics().Peers != int64(n-1) {
				return false
			}
		}
		return true
	})
	return nodes
}

// waitStrictGroup waits until one node leads a group of len(nodes) voters
// and every node knows it, and returns the leader.
func waitStrictGroup(t testing.TB, nodes []*testNode, within time.Duration) *testNode {
	t.Helper()
	var leader *testNode
	waitFor(t, within, fmt.Sprintf("a strict leader with %d voters that every node knows", len(nodes)), func() bool {
		leader = nil
		for _, nd := range nodes {
			if nd.isStrictLeader() {
				leader = nd
			}
		}
		if leader == nil || leader.strictVoters() != len(nodes) {
			return false
		}
		for _, nd := range nodes {
			if nd.strictLeaderName() != leader.Name() {
				return false
			}
		}
		return true
	})
	return leader
}

// strictLog returns the entries of the node's strict log, from the first
// through the last it applied. The log must not have been compacted.
func (n *testNode) strictLog() ([]*raft.Log, error) {
	first, err := n.group().logs.FirstIndex()
	if err != nil {
		return nil, err
	}
	if first > 1 {
		return nil, fmt.Errorf("%s's strict log starts at %d: compacted", n.Name(), first)
	}
	var logs []*raft.Log
	for i := max(first, 1); i <= n.group().raft.AppliedIndex(); i++ {
		l := new(raft.Log)
		if err := n.group().logs.GetLog(i, l); err != nil {
			return nil, fmt.Errorf("%s's strict log entry %d: %w", n.Name(), i, err)
		}
		logs = append(logs, l)
	}
	return logs, nil
}

// appliedCheck is one check as a state machine applied it.
type appliedCheck struct {
	id  uint64
	op  strictOp // rule, key, hits, decision and its time
	idx uint64   // the log entry
}

// replayStrictLog applies logs to a fresh state machine of rules and
// returns every check it decided, in log order, and the state machine.
func replayStrictLog(rules []window.Rule, logs []*raft.Log) ([]appliedCheck, *strictFSM, error) {
	var strict []window.Rule
	for _, r := range rules {
		if r.IsStrict() {
			strict = append(strict, r)
		}
	}
	f, err := newStrictFSM(strict)
	if err != nil {
		return nil, nil, err
	}
	var out []appliedCheck
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		var b sluicev1.StrictBatch
		if err := proto.Unmarshal(l.Data, &b); err != nil {
			return nil, nil, fmt.Errorf("entry %d: %w", l.Index, err)
		}
		res := f.ApplyBatch([]*raft.Log{l})[0].(*strictResult)
		if res.err != nil {
			return nil, nil, res.err
		}
		for i, c := range b.GetChecks() {
			d, err := fromStrict(res.decisions[i])
			out = append(out, appliedCheck{id: c.GetId(), idx: l.Index, op: strictOp{
				rule: c.GetRule(), key: c.GetKey(), hits: c.GetHits(), d: d, err: err, at: res.decisions[i].GetDecidedAt()}})
		}
	}
	return out, f, nil
}
