package strict

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// TestFailedGroupStartReleasesItsStore reloads a clustered node without a
// data dir to its first strict rule while its Raft port is taken: the
// group's start fails after it opened its in-memory log store, and must
// close it. Each store left open would keep about a dozen of badger's
// goroutines running.
func TestFailedGroupStartReleasesItsStore(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	batched := window.Rule{Name: "api", Count: 10, Window: time.Second}
	strict := window.Rule{Name: "pay", Count: 10, Window: time.Minute, SyncInterval: window.Strict}
	nd, err := start(cluster.Config{Name: "solo", Rules: []window.Rule{batched}, GRPCAddr: "127.0.0.1:0",
		BindAddr: "127.0.0.1:0", RaftAddr: taken.Addr().String(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()

	const attempts = 3
	before := runtime.NumGoroutine()
	for range attempts {
		err := nd.Reload(context.Background(), []window.Rule{batched, strict})
		if err == nil || !strings.Contains(err.Error(), "raft_addr") {
			t.Fatalf("reload with the Raft port taken: %v, want a raft_addr error", err)
		}
	}
	if nd.group() != nil {
		t.Fatal("a group whose start failed is kept")
	}
	// A little slack for the node's own goroutines coming and going; a
	// leaked store each time would be many times more.
	waitFor(t, patience, "the goroutines of the failed starts to end", func() bool {
		return runtime.NumGoroutine() <= before+attempts
	})
	if _, err := nd.Allow(context.Background(), "api", "k", 1); err != nil {
		t.Errorf("the batched rule after the failed reloads: %v", err)
	}
}
