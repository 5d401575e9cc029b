package strict

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// TestStrictFailModeWithinCallerDeadline cuts the strict leader off so that
// checks forwarded to it stall, as behind a dropping firewall. Every check
// on a follower must still be answered, through the Go API and over gRPC:
// by the log of a new leader once the others elect one, or by the fail
// mode meanwhile, decided before the caller's deadline.
//
// The node gives up on the leader a margin before the deadline (a tenth of
// the time left, at most 100 ms); a machine that stalls the answer longer
// than that delivers it late, or the node finds the deadline already past
// and reports an unknown outcome. Those are the machine's delays, counted
// and logged; what the node decided, and when on its clock, is asserted.
func TestStrictFailModeWithinCallerDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node strict cluster")
	}
	rules := []window.Rule{
		{Name: "fm-local", Count: 1000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailLocal},
		{Name: "fm-closed", Count: 1000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed},
	}
	// The test reads the nodes' clock: a decision's At and a deadline
	// compare exactly.
	clock := sharedClock(time.Hour)
	sn := newStallNet()
	nodes := startStrictCluster(t, 3, rules, clock, func(c *cluster.Config) { c.Network = sn.node(c.Name) })
	leader := waitStrictGroup(t, nodes, patience)
	var follower *testNode
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

	// A second leaves the node its largest margin, 100 ms, to answer in.
	const deadline = time.Second
	const rounds = 5 // spans the followers' election
	type answer struct {
		via        string
		rule       string
		d          cluster.Decision // Path 255: a gRPC answer of no known path
		err        error
		deadlineAt int64 // the caller's deadline, on the nodes' clock
		late       bool  // returned after the caller's deadline
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
				wg.Go(func() {
					// Read the clock first: the context's deadline is no
					// earlier than this one.
					at := clock() + int64(deadline)
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					defer cancel()
					d, err := follower.Allow(ctx, r.Name, "k", 1)
					record(answer{via: "Allow", rule: r.Name, d: d, err: err, deadlineAt: at, late: ctx.Err() != nil})
				})
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					defer cancel()
					resp, err := client.Check(ctx, &sluicev1.CheckRequest{Rule: r.Name, Key: "k", Hits: 1})
					a := answer{via: "gRPC Check", rule: r.Name, err: err, d: cluster.Decision{Path: window.Path(255)}}
					for _, p := range []window.Path{window.PathStrict, window.PathFailLocal, window.PathFailClosed} {
						if err == nil && resp.GetPath() == p.String() {
							a.d.Path = p
						}
					}
					a.late = err == nil && ctx.Err() != nil
					if status.Code(err) == codes.DeadlineExceeded {
						a.err, a.late = nil, true
					}
					record(a)
				})
			}
		}
		wg.Wait()
	}
	failModes, late := map[string]int{}, 0
	for _, a := range answers {
		want := map[string]window.Path{"fm-local": window.PathFailLocal, "fm-closed": window.PathFailClosed}[a.rule]
		switch {
		case a.via == "Allow" && errors.Is(a.err, strictapi.ErrOutcomeUnknown) && errors.Is(a.err, context.DeadlineExceeded):
			late++ // the node ran only after the deadline
		case a.err != nil:
			t.Errorf("%s %s: %v; want an answer", a.via, a.rule, a.err)
		case a.late && a.d.Path == window.Path(255):
			late++ // a gRPC answer that did not reach the caller in time
		case a.d.Path == want:
			failModes[a.via]++
			if a.late {
				late++
			}
			if at := a.d.At().UnixNano(); a.via == "Allow" && at >= a.deadlineAt {
				t.Errorf("%s %s: decided by the fail mode at %d, %v after the caller's deadline", a.via, a.rule,
					at, time.Duration(at-a.deadlineAt))
			}
		case a.d.Path != window.PathStrict:
			t.Errorf("%s %s: path %v, want %v or strict", a.via, a.rule, a.d.Path, want)
		case a.late:
			late++
		}
	}
	inFlight := follower.Metrics().StrictInFlightFailovers
	t.Logf("%d answers, by the fail mode %v (%d given in flight); %d reached their caller after its deadline",
		len(answers), failModes, inFlight, late)
	// A node that answered by the fail mode only once the deadline had
	// passed would give no caller such an answer, on either path.
	if failModes["Allow"] == 0 || failModes["gRPC Check"] == 0 {
		t.Errorf("fail-mode answers by path %v while the leader was cut off; want some on each: either the test did not cut it off or no answer came in time", failModes)
	}
	if inFlight == 0 {
		t.Errorf("no check on its way to the cut-off leader was answered by the fail mode")
	}
}
