package envoyrls

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster"
)

// statusOf maps an error from Node.AllowAll or Node.Allow to a gRPC status
// whose message is the error's text, which names the check. The keys and
// hits a Server sends are always valid, so what remains are the node's
// own states.
func statusOf(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, cluster.ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, cluster.ErrUnknownRule):
		// A reload removed the rule between the match and the check; the
		// next request matches the new limits.
		code = codes.Unavailable
	case errors.Is(err, cluster.ErrOutcomeUnknown):
		// The strict log may or may not have counted the check.
		code = codes.Aborted
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = status.FromContextError(err).Code()
	}
	return status.Error(code, err.Error())
}
