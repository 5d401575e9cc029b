package strict

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hashicorp/raft"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// strictService serves sluice.v1.Strict: the leader decides checks other
// nodes forward.
type strictService struct {
	sluicev1.UnimplementedStrictServer
	e *engine
}

// maxForward bounds the checks of one Forward call.
const maxForward = strictMaxBatch

// Forward decides forwarded checks if this node leads the strict group.
func (s *strictService) Forward(ctx context.Context, req *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
	g := s.e.group.Load()
	if g == nil {
		return notLeader(req, "", false)
	}
	if len(req.GetChecks()) > maxForward {
		return nil, status.Errorf(codes.InvalidArgument, "checks: at most %d per call, got %d", maxForward, len(req.GetChecks()))
	}
	for i, c := range req.GetChecks() {
		if c == nil {
			return nil, status.Errorf(codes.InvalidArgument, "checks[%d] is empty", i)
		}
	}
	return g.leaderHandle(ctx, req)
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
