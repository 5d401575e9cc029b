package strict

import (
	"context"
	"errors"
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

// TestStrictKeyNotUTF8 sends checks with a key that is not UTF-8 among
// valid ones on a strict rule: each is refused with ErrKeyNotUTF8 before it
// reaches the log, whose entries are protobuf and hold only UTF-8 keys, so
// that the valid checks group-committed beside it are decided as usual.
func TestStrictKeyNotUTF8(t *testing.T) {
	rule := window.Rule{Name: "pay", Count: 1000, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	cfg := cluster.Config{Name: "solo", Rules: []window.Rule{rule}, Logger: testLogger(t), Now: clockOf(sharedClock(time.Hour))}
	patientStrict(&cfg)
	n, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 20 {
				if g%4 == 0 {
					if _, err := n.Allow(context.Background(), "pay", "acct:\xff", 1); !errors.Is(err, cluster.ErrKeyNotUTF8) {
						t.Errorf("a key that is not UTF-8: %v, want ErrKeyNotUTF8", err)
					}
					continue
				}
				d, err := n.Allow(context.Background(), "pay", "acct:1", 1)
				if err != nil {
					t.Errorf("a valid check beside keys that are not UTF-8: %v", err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 120 {
		t.Fatalf("admitted %d valid checks, want all 120", got)
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

// TestStrictClusterSeveralLimitsIsExact checks a strict rule of two limits
// decided from every node of a 3-node group at once, most checks forwarded
// by followers: the lesser limit is met exactly, and the other limit,
// which admitted every check the lesser refused before the log gave those
// hits back, holds only the admitted ones.
func TestStrictClusterSeveralLimitsIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	rule := window.Rule{Name: "pay", Count: 30, Window: time.Hour, Type: window.Sliding, SyncInterval: window.Strict,
		Also: []window.Limit{{Count: 25, Window: 2 * time.Hour, Type: window.Fixed}}}
	cl := startStrictCluster(t, 3, []window.Rule{rule}, sharedClock(2*time.Hour), patientStrict)
	waitStrictGroup(t, cl, patience)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, nd := range cl {
		for range 4 {
			wg.Go(func() {
				for range 20 {
					d, err := nd.Allow(context.Background(), "pay", "acct:1", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Path != window.PathStrict {
						t.Errorf("decided on path %v, not by the log", d.Path)
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if got := admitted.Load(); got != 25 {
		t.Fatalf("admitted %d of 240 across 3 nodes, want exactly the lesser count 25", got)
	}
	// The log's own counts, on every node once it applied the last check:
	// counts only grow, so a refused check that consumed a limit shows
	// above the 25 admitted.
	for _, part := range []string{"pay", "pay" + window.PartSep + "2"} {
		for _, nd := range cl {
			waitFor(t, patience, nd.Name()+" applying the last check", func() bool {
				c, _ := nd.strictCounts(part, "acct:1")
				return c.Curr >= 25
			})
			if c, _ := nd.strictCounts(part, "acct:1"); c.Curr != 25 {
				t.Errorf("%s: limit %s holds %d, want the 25 admitted: a refused check consumed it", nd.Name(), part, c.Curr)
			}
		}
	}
}
