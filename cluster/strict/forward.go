package strict

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// forwardLoop sends the checks of a following node to the leader, as many
// per call as are waiting.
func (g *strictGroup) forwardLoop(ctx context.Context) {
	pump(ctx, g.fwd, func(batch []*strictPending) { g.forward(ctx, batch) })
}

// forward asks the leader to decide a batch.
func (g *strictGroup) forward(ctx context.Context, batch []*strictPending) {
	id := g.leader(ctx)
	p, ok := g.e.peerByRaftID(id)
	if !ok || p.Conn.GetState() == connectivity.TransientFailure || p.Conn.GetState() == connectivity.Shutdown {
		// Not sent: the leader is unknown or cannot be reached.
		g.leaderHint.Store("")
		failAll(batch, errNoLeader)
		return
	}
	checks := checksOf(batch)
	g.e.c.StrictForwarded.Add(int64(len(checks)))
	ds, err := g.forwardTo(ctx, p, checks)
	if err != nil {
		failAll(batch, err)
		return
	}
	answer(batch, ds)
}

// forwardTo asks peer p, which this node takes for the leader, to decide
// checks, and returns a decision per check. The error is errNoLeader when
// nothing was appended (p does not lead, or the call never reached it), so
// that the checks may go elsewhere, and strictapi.ErrOutcomeUnknown when the log may
// have decided them.
func (g *strictGroup) forwardTo(ctx context.Context, p strictapi.Peer, checks []*sluicev1.StrictCheck) ([]*sluicev1.StrictDecision, error) {
	callCtx, cancel := context.WithTimeout(ctx, g.e.set.Timeout)
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
	resp, err := sluicev1.NewStrictClient(p.Conn).Forward(callCtx,
		&sluicev1.ForwardRequest{Checks: checks, Redirect: true}, grpc.Peer(&reached))
	switch {
	case err != nil && (reached.Addr == nil || status.Code(err) == codes.FailedPrecondition):
		// Never sent, or the leader's own word that it appended nothing
		// (and an older node's way to say it does not lead).
		g.leaderHint.Store("")
		return nil, errNoLeader
	case err != nil:
		return nil, fmt.Errorf("%w: forwarded to %s: %w", strictapi.ErrOutcomeUnknown, p.RaftID, err)
	case resp.GetNotLeader() != nil:
		g.noteLeader(resp.GetNotLeader())
		return nil, errNoLeader
	case len(resp.GetDecisions()) != len(checks):
		return nil, fmt.Errorf("%w: %s answered %d of %d checks", strictapi.ErrOutcomeUnknown, p.RaftID, len(resp.GetDecisions()), len(checks))
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
	for _, p := range g.e.h.Peers() {
		if p.RaftAddr == "" {
			continue
		}
		nl, err := probe(ctx, p, 200*time.Millisecond)
		switch {
		case err != nil:
		case nl == nil:
			g.leaderHint.Store(p.RaftID)
			return p.RaftID
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
func probe(ctx context.Context, p strictapi.Peer, timeout time.Duration) (*sluicev1.NotLeader, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := sluicev1.NewStrictClient(p.Conn).Forward(ctx, &sluicev1.ForwardRequest{Redirect: true})
	if err != nil {
		return nil, err
	}
	return resp.GetNotLeader(), nil
}
