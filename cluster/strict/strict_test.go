package strict

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

func TestStrictSingleNodeIsExact(t *testing.T) {
	rule := window.Rule{Name: "pay", Count: 50, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	// Until it has elected itself a check waits; on a slow machine, longer
	// than the default strict timeout.
	// On a clock that starts an hour's window: the test never sees one roll.
	cfg := cluster.Config{Name: "solo", Rules: []window.Rule{rule}, Logger: testLogger(t), Now: clockOf(sharedClock(time.Hour))}
	patientStrict(&cfg)
	n, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				d, err := n.Allow(context.Background(), "pay", "acct:1", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Path != window.PathStrict {
					t.Errorf("decision path %v, want strict", d.Path)
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 50 {
		t.Fatalf("admitted %d of 160, want exactly the count 50", got)
	}
}

func TestStrictClusterIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	rule := window.Rule{Name: "pay", Count: 300, Window: time.Hour, Type: window.Sliding, SyncInterval: window.Strict}
	cl := startStrictCluster(t, 3, []window.Rule{rule}, sharedClock(time.Hour), patientStrict)
	waitStrictGroup(t, cl, patience)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, nd := range cl {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					d, err := nd.Allow(context.Background(), "pay", "acct:1", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	if got := admitted.Load(); got != 300 {
		t.Fatalf("admitted %d of 600 across 3 nodes, want exactly the count 300", got)
	}
}
