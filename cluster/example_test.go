package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// A single embedded node: 100 requests per second per key, sliding. A rule
// that sets no SyncInterval is batched at window.DefaultSyncInterval.
func ExampleStart() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second, Type: window.Sliding}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	d, err := node.Allow(ctx, "api", "user:42", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Allowed, d.Limit, d.Remaining)
	// Output: true 100 99
}

// A check that names a rule the node does not have is an error to match
// with errors.Is, not a refusal.
func ExampleNode_Allow_unknownRule() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	_, err = node.Allow(ctx, "apj", "user:42", 1)
	fmt.Println(errors.Is(err, cluster.ErrUnknownRule))
	// Output: true
}

// Metrics are read as values, one moment's copy of the node's counters.
func ExampleNode_Metrics() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	m := node.Metrics()
	fmt.Println(m.Members, m.Peers, m.Borrows)
	// Output: 1 0 0
}
