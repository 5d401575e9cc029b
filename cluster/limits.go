package cluster

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/cluster/internal/wire"
)

// DefaultMaxKeys is how many keys a node holds at most when
// Config.MaxKeys is zero: about 250 MB of counter tables at the 200–250
// bytes a key takes, far above the keys most nodes serve in two windows.
const DefaultMaxKeys = 1_000_000

// deltaRefused is the code a peer's delta that wire.ParseDelta refused is
// answered with: ResourceExhausted, counted, for one too large, else
// InvalidArgument.
func (n *Node) deltaRefused(err error) codes.Code {
	if errors.Is(err, wire.ErrDeltaTooLarge) {
		n.metrics.RefusedDeltaSize.Add(1)
		return codes.ResourceExhausted
	}
	return codes.InvalidArgument
}
