package cluster

import (
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger routes raft's hclog output into the node's slog logger.
func newRaftLogger(log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       hclog.Info,
		Output:      &levelLog{log: log.With("component", "raft")},
		DisableTime: true,
	})
}
