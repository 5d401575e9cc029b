package strict

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/raftstore"
	"github.com/sluicehq/sluice/window"
)

// TestChanges checks the broadcast: a notify wakes every channel taken
// before it, and none taken after.
func TestChanges(t *testing.T) {
	c := newChanges()
	before := []<-chan struct{}{c.changed(), c.changed()}
	c.notify()
	after := c.changed()
	for i, ch := range before {
		select {
		case <-ch:
		default:
			t.Errorf("waiter %d, which took the channel before the change, is not woken", i)
		}
	}
	select {
	case <-after:
		t.Error("a channel taken after the change is already closed")
	default:
	}
}

// unbootstrappedGroup is a strict group of nd's with a log in memory and no
// configuration: it elects no leader until bootstrap. Its loops run until
// the returned stop, which also releases it (and runs at cleanup).
func unbootstrappedGroup(t *testing.T, nd *testNode, rules []window.Rule) (*strictGroup, func()) {
	t.Helper()
	g := newGroupShell(nd.e, rules)
	g.id = raft.ServerID(nd.Name())
	st, err := store.Open("", store.WithLogger(nd.e.log))
	if err != nil {
		t.Fatal(err)
	}
	g.logs, g.ownLogs, g.snaps = raftstore.New(st), true, raft.NewInmemSnapshotStore()
	addr, trans := raft.NewInmemTransport(raft.ServerAddress(nd.Name()))
	g.trans, g.addr = trans, string(addr)
	if err := g.openRaft(nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go g.run(ctx)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-g.ran
			g.close()
		})
	}
	t.Cleanup(stop)
	return g, stop
}

// TestStrictWakesOnElection starts a check and a wait for the leader on a
// group that has none, then lets it elect one. The retry pause is an hour
// and the check's deadline a minute, so both can only come back in time,
// decided by the log, if Raft's observation of the election wakes them.
func TestStrictWakesOnElection(t *testing.T) {
	strict := []window.Rule{{Name: "s", Count: 5, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}}
	nd, err := start(cluster.Config{Name: "solo", Logger: testLogger(t), Strict: Mode{retry: time.Hour},
		Rules: []window.Rule{{Name: "b", Count: 5, Window: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })

	t.Run("check", func(t *testing.T) {
		g, stop := unbootstrappedGroup(t, nd, strict)
		// The log decides the rule already, so that the first check after
		// the election is decided whether or not the leader has written
		// its rules yet.
		g.fsm.mu.Lock()
		if err := g.fsm.replica.SetRules(strict, 0); err != nil {
			t.Fatal(err)
		}
		g.fsm.rules = strict
		g.fsm.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		answered := make(chan strictAnswer, 1)
		go func() { answered <- g.checkAt(ctx, strict[0], "k", 1) }()
		g.bootstrap()
		var a strictAnswer
		select {
		case a = <-answered:
		case <-time.After(patience):
			t.Fatal("the check is still waiting")
		}
		if a.err != nil || a.d.Path != window.PathStrict || !a.d.Allowed {
			t.Errorf("the check came back %+v, %v; want admitted by the log", a.d, a.err)
		}
		stop()
		select {
		case <-g.watch.stopped:
		default:
			t.Error("the group is closed and its Raft watch still runs")
		}
	})

	t.Run("waitLeader", func(t *testing.T) {
		g, _ := unbootstrappedGroup(t, nd, strict)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.waitLeader(ctx)
		}()
		g.bootstrap()
		select {
		case <-done:
		case <-time.After(patience):
			t.Fatal("waitLeader is still waiting")
		}
		// It waits for the leader and then for the entry with the rules,
		// after which nothing but the state machine's notice wakes it.
		if ctx.Err() != nil || g.raft.State() != raft.Leader || !g.fsm.hasRules(*g.rules.Load()) {
			t.Errorf("waitLeader returned with ctx %v, state %v, rules in the log %v; want a leader that decides the rules",
				ctx.Err(), g.raft.State(), g.fsm.hasRules(*g.rules.Load()))
		}
	})
}

// TestStrictFailoverWakesOnElection stops the strict leader's Raft, leaving
// its node up (gossip and gRPC answer, so no membership change wakes
// anyone), and checks on each survivor at once, with the retry pause an
// hour: the checks are decided by the log, once the survivors elect a
// leader, only if Raft's observations wake them.
func TestStrictFailoverWakesOnElection(t *testing.T) {
	rules := []window.Rule{{Name: "s", Count: 1000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}}
	nodes := startStrictCluster(t, 3, rules, nil, func(c *cluster.Config) { c.Strict = Mode{retry: time.Hour} })
	leader := waitStrictGroup(t, nodes, patience)
	leader.group().shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, nd := range nodes {
		if nd == leader {
			continue
		}
		wg.Go(func() {
			d, err := nd.Allow(ctx, "s", nd.Name(), 1)
			if err != nil || d.Path != window.PathStrict {
				t.Errorf("%s's check after the leader stopped: %+v, %v; want decided by the log", nd.Name(), d, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		// What each survivor's Raft thought at the end tells an election
		// that never came from one the checks slept through.
		for _, nd := range nodes {
			if nd != leader {
				t.Logf("%s's Raft at the end: %v", nd.Name(), nd.group().raft.Stats())
			}
		}
	}
}
