package cluster_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// A single embedded node: 100 requests per second per key, sliding.
func ExampleStart() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second,
			Type: window.Sliding, SyncInterval: 200 * time.Millisecond}},
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
