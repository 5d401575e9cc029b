package strict

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// TestOutsiderFindsTheLeaderAtStart starts a fourth node in a fleet of
// three voters. Outside the group's configuration its Raft hears no
// heartbeat and never names a leader, so Start waited its whole
// JoinTimeout for one, a minute here, on every node beyond the voters of
// a large fleet. It asks the members instead, and starts as soon as one
// names the leader.
func TestOutsiderFindsTheLeaderAtStart(t *testing.T) {
	rules := []window.Rule{{Name: "s", Count: 100, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}}
	var log syncBuffer
	nodes := startStrictCluster(t, 4, rules, nil, func(c *cluster.Config) {
		c.StrictVoters = 3
		if c.Name == "node-3" {
			c.JoinTimeout = time.Minute
			c.Logger = slog.New(slog.NewTextHandler(&log, nil))
		}
	})
	if out := log.String(); strings.Contains(out, "no strict leader yet") {
		t.Fatalf("node-3 waited out its JoinTimeout for a leader:\n%s", out)
	}
	if d, err := nodes[3].Allow(t.Context(), "s", "k", 1); err != nil || !d.Allowed || d.Path != window.PathStrict {
		t.Fatalf("node-3's first strict check: %+v, %v; want admitted by the log", d, err)
	}
}
