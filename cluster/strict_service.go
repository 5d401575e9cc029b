package cluster

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// strictService serves sluice.v1.Strict: the leader decides checks other
// nodes forward.
type strictService struct {
	sluicev1.UnimplementedStrictServer
	node *Node
}

// maxForward bounds the checks of one Forward call.
const maxForward = strictMaxBatch

// Forward decides forwarded checks if this node leads the strict group.
func (s *strictService) Forward(ctx context.Context, req *sluicev1.ForwardRequest) (*sluicev1.ForwardResponse, error) {
	g := s.node.strictG.Load()
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
