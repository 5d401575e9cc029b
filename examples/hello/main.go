// Command hello is the smallest program that embeds a sluice node: one
// batched rule, one check, Close. What it links is what every embedding
// with batched rules links: no Raft (strict mode is package cluster/strict,
// which only a program that sets Config.Strict imports), no YAML parser
// (package cluster/configfile) and no Prometheus client (package
// cluster/prom); hello_test.go checks all three.
//
//	go build -o /tmp/hello ./examples/hello && /tmp/hello
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

func main() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second}},
	})
	if err != nil {
		log.Fatal(err)
	}
	d, err := node.Allow(ctx, "api", "user:42", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("allowed:", d.Allowed, "remaining:", d.Remaining)
	if err := node.Close(); err != nil {
		log.Fatal(err)
	}
}
