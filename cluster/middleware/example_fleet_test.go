package middleware_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/middleware"
	"github.com/sluicehq/sluice/window"
)

// Two instances of a service behind a load balancer (10.0.0.1) limit each
// client IP to 3 requests a minute across the fleet, whichever instance
// gets a request. The rule is batched, the default: at a count this small
// (below 20 per node) a node asks the key's owner for every hit, so once
// the two see each other they count as one exact limiter. The nodes run on
// a fixed clock, 10 s into a minute, so that the output is the same on
// every run.
func ExampleHTTP_fleet() {
	// The embedding is the 29 lines from here to the end of the wait for
	// the fleet, one loop turn per instance; the requests after it show
	// what it does.
	var nodes []*cluster.Node
	var handlers []http.Handler
	var seeds []string // gossip addresses of the nodes already running
	for _, name := range []string{"a", "b"} {
		node, err := cluster.Start(context.Background(), cluster.Config{
			Name: name, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", Join: seeds,
			Rules:  []window.Rule{{Name: "per-ip", Count: 3, Window: time.Minute, Type: window.Fixed}},
			Now:    func() time.Time { return time.Date(2030, 1, 1, 12, 0, 10, 0, time.UTC) },
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			log.Fatal(err)
		}
		defer node.Close()
		perIP, err := node.Limiter("per-ip")
		if err != nil {
			log.Fatal(err)
		}
		limit := middleware.HTTP(perIP, middleware.KeyFromClientIP(netip.MustParsePrefix("10.0.0.0/8")))
		handlers = append(handlers, limit(http.HandlerFunc(hello)))
		nodes, seeds = append(nodes, node), append(seeds, node.GossipAddr())
	}
	// Wait until each node streams to the other: before, each owns every key.
	for deadline := time.Now().Add(10 * time.Second); nodes[0].Metrics().Peers+nodes[1].Metrics().Peers < 2; {
		if time.Now().After(deadline) {
			log.Fatal("the nodes did not find each other")
		}
		time.Sleep(10 * time.Millisecond) // the poll interval
	}

	// The balancer sends one client's requests to a and b in turn; then
	// another client's.
	for i, client := range []string{"198.51.100.7", "198.51.100.7", "198.51.100.7", "198.51.100.7", "198.51.100.7", "203.0.113.9"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "10.0.0.1:40000"
		req.Header.Set("X-Forwarded-For", client)
		rec := httptest.NewRecorder()
		handlers[i%2].ServeHTTP(rec, req)
		fmt.Println(nodes[i%2].Name(), client, rec.Code, rec.Header().Get("RateLimit"))
	}
	// Output:
	// a 198.51.100.7 200 "per-ip";r=2;t=50
	// b 198.51.100.7 200 "per-ip";r=1;t=50
	// a 198.51.100.7 200 "per-ip";r=0;t=50
	// b 198.51.100.7 429 "per-ip";r=0;t=50
	// a 198.51.100.7 429 "per-ip";r=0;t=50
	// b 203.0.113.9 200 "per-ip";r=2;t=50
}

// hello is the service's handler.
func hello(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") }
