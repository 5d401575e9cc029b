package strict

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// scriptedStrict is a Strict server whose Forward a test scripts.
type scriptedStrict struct {
	sluicev1.UnimplementedStrictServer
	calls   atomic.Int32
	forward func(context.Context, *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error)
}

func (s *scriptedStrict) Forward(ctx context.Context, req *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
	s.calls.Add(1)
	return s.forward(ctx, req)
}

// cuttable is a listener that keeps what it accepts, so that a test can
// cut a connection while a call is on it.
type cuttable struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *cuttable) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *cuttable) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// serveScripted serves s on a loopback port and returns its address and
// a function that cuts its connections.
func serveScripted(t *testing.T, s *scriptedStrict) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &cuttable{Listener: lis}
	srv := grpc.NewServer()
	sluicev1.RegisterStrictServer(srv, s)
	go srv.Serve(cl)
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), cl.cut
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// dialLeader is a peer at addr that a node takes for the strict leader.
func dialLeader(t *testing.T, addr string) strictapi.Peer {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return strictapi.Peer{Name: "leader", RaftID: "leader-id", Conn: conn}
}

// startLoneStrict starts a lone node leading its own strict group.
func startLoneStrict(t *testing.T) *testNode {
	t.Helper()
	rules := []window.Rule{{Name: "s", Count: 5, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}}
	nd, err := start(cluster.Config{Name: "solo", Rules: rules, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}

// TestForwardNeverSentOrUnknown forwards checks to leaders that fail in
// different ways. Only a call that never reached the leader, or the
// leader's word that it appended nothing, lets the checks go elsewhere
// (errNoLeader); a call that reached it may have been decided, whatever
// its status code (strictapi.ErrOutcomeUnknown).
func TestForwardNeverSentOrUnknown(t *testing.T) {
	g := startLoneStrict(t).group()
	checks := []*sluicev1.StrictCheck{{Id: 1, Rule: "s", Key: "k", Hits: 1}}
	decided := []*sluicev1.StrictDecision{{Id: 1, Allowed: true, Limit: 5, Remaining: 4}}
	var cut func()
	tests := []struct {
		name string
		// forward scripts the leader; nil: nothing listens at its address.
		forward   func(context.Context, *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error)
		want      error // errNoLeader, strictapi.ErrOutcomeUnknown, or nil: decided
		wantCalls int32
		wantHint  string
	}{
		{name: "leader address not listening", want: errNoLeader},
		{name: "reached, no answer in time", wantCalls: 1, want: strictapi.ErrOutcomeUnknown,
			forward: func(ctx context.Context, _ *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}},
		{name: "reached, connection lost", wantCalls: 1, want: strictapi.ErrOutcomeUnknown,
			forward: func(ctx context.Context, _ *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
				cut()
				<-ctx.Done()
				return nil, ctx.Err()
			}},
		{name: "reached, leader says unavailable", wantCalls: 1, want: strictapi.ErrOutcomeUnknown,
			forward: func(context.Context, *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
				return nil, status.Error(codes.Unavailable, unknownMessage)
			}},
		{name: "leader appended nothing", wantCalls: 1, want: errNoLeader,
			forward: func(context.Context, *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
				return nil, status.Error(codes.FailedPrecondition, "the leader is busy; nothing was appended")
			}},
		{name: "not the leader, names another", wantCalls: 1, want: errNoLeader, wantHint: "other-id",
			forward: func(_ context.Context, req *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
				if !req.GetRedirect() {
					return nil, status.Error(codes.InvalidArgument, "the request did not ask for a redirect")
				}
				return &sluicev1.ForwardResponse{NotLeader: &sluicev1.NotLeader{Leader: "other-id", InGroup: true}}, nil
			}},
		{name: "not the leader, names the sender", wantCalls: 1, want: errNoLeader,
			forward: func(context.Context, *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
				return &sluicev1.ForwardResponse{NotLeader: &sluicev1.NotLeader{Leader: string(g.id), InGroup: true}}, nil
			}},
		{name: "answers too few", wantCalls: 1, want: strictapi.ErrOutcomeUnknown,
			forward: func(context.Context, *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
				return &sluicev1.ForwardResponse{}, nil
			}},
		{name: "decided", wantCalls: 1,
			forward: func(context.Context, *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
				return &sluicev1.ForwardResponse{Decisions: decided}, nil
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, s := closedAddr(t), &scriptedStrict{forward: tt.forward}
			if tt.forward != nil {
				addr, cut = serveScripted(t, s)
			}
			g.leaderHint.Store("stale")
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			ds, err := g.forwardTo(ctx, dialLeader(t, addr), checks)
			switch {
			case tt.want == nil && (err != nil || len(ds) != 1 || !ds[0].GetAllowed()):
				t.Errorf("got %v, %v; want the leader's decision", ds, err)
			case tt.want == errNoLeader && (!errors.Is(err, errNoLeader) || errors.Is(err, strictapi.ErrOutcomeUnknown)):
				t.Errorf("got %v; want errNoLeader: the checks may go elsewhere", err)
			case tt.want == strictapi.ErrOutcomeUnknown && (!errors.Is(err, strictapi.ErrOutcomeUnknown) || errors.Is(err, errNoLeader)):
				t.Errorf("got %v; want strictapi.ErrOutcomeUnknown: the leader may have decided the checks", err)
			}
			if got := s.calls.Load(); got != tt.wantCalls {
				t.Errorf("the leader saw %d calls, want %d", got, tt.wantCalls)
			}
			if tt.want == errNoLeader {
				if hint, _ := g.leaderHint.Load().(string); hint != tt.wantHint {
					t.Errorf("leader hint %q, want %q", hint, tt.wantHint)
				}
			}
		})
	}
}

// TestForwardedDecisionErrors forwards checks the log cannot decide from a
// follower to the leader: each comes back as the error the leader had,
// errors.Is-matching the same sentinel.
func TestForwardedDecisionErrors(t *testing.T) {
	rules := []window.Rule{{Name: "s", Count: 3, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}}
	nodes := startStrictCluster(t, 2, rules, nil, nil)
	leader := waitStrictGroup(t, nodes, patience)
	follower := nodes[0]
	if follower == leader {
		follower = nodes[1]
	}
	waitFor(t, patience, "the log holds the rules", func() bool { return follower.group().fsm.hasRules(*follower.group().rules.Load()) })
	p := follower.peerNamed(leader.Name())
	if p.Conn == nil {
		t.Fatalf("%s has no peer %s", follower.Name(), leader.Name())
	}
	tests := []struct {
		check *sluicev1.StrictCheck
		want  error
	}{
		{&sluicev1.StrictCheck{Rule: "s", Key: "k", Hits: 1}, nil},
		{&sluicev1.StrictCheck{Rule: "nope", Key: "k", Hits: 1}, cluster.ErrUnknownRule},
		{&sluicev1.StrictCheck{Rule: "s", Key: "", Hits: 1}, cluster.ErrEmptyKey},
		{&sluicev1.StrictCheck{Rule: "s", Key: "k", Hits: -1}, cluster.ErrNegativeHits},
		{&sluicev1.StrictCheck{Rule: "s", Key: "k", Hits: 4}, cluster.ErrHitsOverCount},
	}
	checks := make([]*sluicev1.StrictCheck, len(tests))
	for i, tt := range tests {
		tt.check.Id = uint64(i + 1)
		checks[i] = tt.check
	}
	ds, err := follower.group().forwardTo(context.Background(), p, checks)
	if err != nil {
		t.Fatal(err)
	}
	local := leader.group().fsm.replica
	for i, tt := range tests {
		d, err := fromStrict(ds[i])
		what := fmt.Sprintf("check %d (%s %q %d)", i+1, tt.check.Rule, tt.check.Key, tt.check.Hits)
		if tt.want == nil {
			if err != nil || !d.Allowed || d.Path != window.PathStrict {
				t.Errorf("%s: %+v, %v; want admitted by the log", what, d, err)
			}
			continue
		}
		checkSentinel(t, what, err, tt.want)
		// The text is the leader's: what its own state machine says.
		if want := local.Check(tt.check.Rule, tt.check.Key, tt.check.Hits); err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("%s: text %v, want the leader's %v", what, err, want)
		}
	}
}

// TestNotLeaderNamesTheLeader asks a voter that does not lead: it names the
// leader in the response, and a node that does not vote sends its next
// check there. A caller that predates NotLeader still gets the leader in a
// FAILED_PRECONDITION message.
func TestNotLeaderNamesTheLeader(t *testing.T) {
	rules := []window.Rule{{Name: "s", Count: 100, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}}
	nodes := startStrictCluster(t, 4, rules, nil, func(c *cluster.Config) { c.StrictVoters = 3 })
	var leader, follower, outsider *testNode
	waitFor(t, patience, "a leader of three voters, one of which knows it, and a node that does not vote", func() bool {
		leader, follower, outsider = nil, nil, nil
		for _, nd := range nodes {
			switch {
			case !nd.group().isVoter():
				outsider = nd
			case nd.isStrictLeader():
				leader = nd
			default:
				follower = nd
			}
		}
		return leader != nil && follower != nil && outsider != nil && leader.strictVoters() == 3 &&
			follower.strictLeaderName() == leader.Name()
	})
	leaderID := string(leader.group().id)
	og := outsider.group()
	toFollower := outsider.peerNamed(follower.Name())
	ctx := context.Background()

	nl, err := probe(ctx, toFollower, time.Second)
	if err != nil || nl == nil || nl.GetLeader() != leaderID || !nl.GetInGroup() {
		t.Errorf("the follower answers a probe with %v, %v; want it to name %s, in a group", nl, err, leaderID)
	}
	if nl, err := probe(ctx, outsider.peerNamed(leader.Name()), time.Second); err != nil || nl != nil {
		t.Errorf("the leader answers a probe with %v, %v; want an empty answer", nl, err)
	}

	// A caller that predates NotLeader.
	_, err = sluicev1.NewStrictClient(toFollower.Conn).Forward(ctx, &sluicev1.ForwardRequest{})
	if want := fmt.Sprintf("%s%q", leaderIsPrefix, leaderID); status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != want {
		t.Errorf("without redirect the follower answers %v; want FAILED_PRECONDITION %q", err, want)
	}

	// The outsider's Raft knows no leader: the follower's answer tells it.
	og.leaderHint.Store("")
	if _, err := og.forwardTo(ctx, toFollower, []*sluicev1.StrictCheck{{Id: 1, Rule: "s", Key: "k", Hits: 1}}); !errors.Is(err, errNoLeader) {
		t.Fatalf("forwarding to the follower: %v, want errNoLeader", err)
	}
	if got := og.leader(ctx); got != leaderID {
		t.Errorf("after the follower's answer the outsider takes %q for the leader, want %q", got, leaderID)
	}
	d, err := outsider.Allow(ctx, "s", "k", 1)
	if err != nil || d.Path != window.PathStrict {
		t.Errorf("the outsider's check: %+v, %v; want decided by the log", d, err)
	}
}
