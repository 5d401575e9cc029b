package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// TestStrictFailModeWithinCallerDeadline cuts the strict leader off so that
// checks forwarded to it stall, as behind a dropping firewall. Every check
// on a follower must still be answered, through the Go API and over gRPC,
// before the caller's deadline: by the log of a new leader once the others
// elect one, or by the fail mode meanwhile; never with the caller's own
// deadline exceeded.
func TestStrictFailModeWithinCallerDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node strict cluster")
	}
	rules := []window.Rule{
		{Name: "fm-local", Count: 1000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailLocal},
		{Name: "fm-closed", Count: 1000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed},
	}
	sn := newStallNet()
	nodes := startStrictCluster(t, 3, rules, nil, func(c *Config) { c.Network = sn.node(c.Name) })
	leader := waitStrictGroup(t, nodes, 30*time.Second)
	var follower *Node
	for _, nd := range nodes {
		if nd != leader {
			follower = nd
			break
		}
	}
	conn, err := grpc.NewClient(follower.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := sluicev1.NewLimiterClient(conn)
	sn.isolate(leader.Name())
	t.Cleanup(sn.heal)

	const deadline = 400 * time.Millisecond
	const rounds = 5 // spans the followers' election
	type answer struct {
		via  string
		rule string
		path window.Path
		err  error
		late bool
	}
	var (
		mu      sync.Mutex
		answers []answer
	)
	record := func(a answer) {
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
	}
	for range rounds {
		var wg sync.WaitGroup
		for _, r := range rules {
			for range 4 {
				wg.Add(2)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					defer cancel()
					d, err := follower.Allow(ctx, r.Name, "k", 1)
					record(answer{via: "Allow", rule: r.Name, path: d.Path, err: err, late: ctx.Err() != nil})
				}()
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					defer cancel()
					resp, err := client.Check(ctx, &sluicev1.CheckRequest{Rule: r.Name, Key: "k", Hits: 1})
					a := answer{via: "gRPC Check", rule: r.Name, err: err, path: window.Path(255)}
					for _, p := range []window.Path{window.PathStrict, window.PathFailLocal, window.PathFailClosed} {
						if err == nil && resp.GetPath() == p.String() {
							a.path = p
						}
					}
					record(a)
				}()
			}
		}
		wg.Wait()
	}
	failModes := 0
	for _, a := range answers {
		want := map[string]window.Path{"fm-local": window.PathFailLocal, "fm-closed": window.PathFailClosed}[a.rule]
		switch {
		case a.err != nil:
			t.Errorf("%s %s: %v; want an answer within the caller's %v", a.via, a.rule, a.err, deadline)
		case a.late:
			t.Errorf("%s %s: answered %v after the caller's deadline", a.via, a.rule, a.path)
		case a.path == want:
			failModes++
		case a.path != window.PathStrict:
			t.Errorf("%s %s: path %v, want %v or strict", a.via, a.rule, a.path, want)
		}
	}
	if failModes == 0 {
		t.Errorf("no check was answered by its fail mode while the leader was cut off: the test did not cut it off")
	}
	t.Logf("%d answers, %d by the fail mode, %d fail-mode answers given in flight", len(answers), failModes,
		follower.Metrics().StrictInFlightFailovers.Load())
}
