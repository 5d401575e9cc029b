package strict_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// A node enables strict mode with Config.Strict; its strict rules are then
// decided through the Raft log, exactly: a lone node's log is its own.
func ExampleMode() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "pay", Count: 2, Window: time.Minute, Type: window.Fixed,
			SyncInterval: window.Strict}},
		Strict: strict.Mode{},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	for range 3 {
		d, err := node.Allow(ctx, "pay", "acct:1", 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Allowed, d.Path)
	}
	// Output:
	// true strict
	// true strict
	// false strict
}
