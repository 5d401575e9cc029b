package strict

import (
	"log/slog"

	"github.com/hashicorp/go-hclog"

	"github.com/sluicehq/sluice/cluster/internal/liblog"
)

// newRaftLogger routes raft's hclog output into the node's slog logger.
func newRaftLogger(log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       hclog.Info,
		Output:      &liblog.Writer{Log: log.With("component", "raft")},
		DisableTime: true,
	})
}
