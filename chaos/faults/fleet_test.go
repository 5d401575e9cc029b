package faults

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/chaos/faultnet"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// TestAddrInUse starts nodes through the switchboard on ports something
// else holds, and on a bad rule: only a taken port is a reason to restart
// elsewhere, whichever of the node's listeners it stopped.
func TestAddrInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	rules := []window.Rule{{Name: "api", Count: 10, Window: time.Second}}
	tests := []struct {
		name string
		cfg  func(*cluster.Config)
		want bool
	}{
		{"grpc port taken", func(c *cluster.Config) { c.GRPCAddr = taken.Addr().String() }, true},
		{"gossip port taken", func(c *cluster.Config) { c.BindAddr = taken.Addr().String() }, true},
		{"raft port taken", func(c *cluster.Config) {
			c.Rules = []window.Rule{{Name: "s", Count: 10, Window: time.Second, SyncInterval: window.Strict}}
			c.RaftAddr = taken.Addr().String()
		}, true},
		{"bad rule", func(c *cluster.Config) { c.Rules = []window.Rule{{Name: "bad", Count: -1, Window: time.Second}} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Fleet{Net: faultnet.New(1), names: []string{"n0"}, members: map[string]*member{}}
			defer f.Close()
			m := &member{}
			f.members["n0"] = m
			cfg := cluster.Config{Name: "n0", Rules: rules, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0",
				JoinTimeout: time.Second, ShutdownTimeout: time.Second, Logger: slog.New(slog.DiscardHandler), Network: f.Net.Node("n0"), Now: f.Net.Clock("n0"),
				Strict: strict.Mode{}}
			tt.cfg(&cfg)
			err := f.run(context.Background(), m, cfg)
			if err == nil {
				t.Fatal("the node started")
			}
			if got := addrInUse(err); got != tt.want {
				t.Errorf("addrInUse(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}

// TestRestartOnTakenPort restarts a node whose last gRPC port was taken
// while it was down: it comes back on fresh ports.
func TestRestartOnTakenPort(t *testing.T) {
	ctx := context.Background()
	f, err := Start(ctx, Options{Nodes: 1, Rules: []window.Rule{{Name: "api", Count: 10, Window: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := f.Node("n0").GRPCAddr()
	if err := f.Kill("n0"); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", old)
	if err != nil {
		t.Fatalf("taking the node's old port %s: %v", old, err)
	}
	defer taken.Close()
	if err := f.Restart(ctx, "n0"); err != nil {
		t.Fatalf("restart on a taken port: %v", err)
	}
	if now := f.Node("n0").GRPCAddr(); now == old {
		t.Errorf("the restarted node serves on %s, which another listener holds", now)
	}
	if _, err := f.Node("n0").Allow(ctx, "api", "k", 1); err != nil {
		t.Errorf("the restarted node does not decide: %v", err)
	}
}
