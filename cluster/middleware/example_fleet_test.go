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
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// Two instances of a service behind a load balancer (10.0.0.1) limit each
// client IP to 3 requests a minute across the fleet, whichever instance
// gets a request. The rule is strict, decided in one Raft log, so the
// fleet's count is exact on every run; a batched rule, the default, is as
// exact at this count only while each node's question to a key's owner is
// answered in time, which a loaded machine does not promise. The nodes run
// on a fixed clock, 10 s into a minute, so that the output is the same on
// every run.
func ExampleHTTP_fleet() {
	// The embedding is the 30 lines from here to the end of the wait for
	// the fleet, one loop turn per instance; the requests after it show
	// what it does.
	var nodes []*cluster.Node
	var handlers []http.Handler
	var seeds []string // gossip addresses of the nodes already running
	for _, name := range []string{"a", "b"} {
		node, err := cluster.Start(context.Background(), cluster.Config{
			Name: name, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", Join: seeds,
			Rules:  []window.Rule{{Name: "per-ip", Count: 3, Window: time.Minute, Type: window.Fixed, SyncInterval: window.Strict}},
			Strict: strict.Mode{}, StrictBootstrapWait: time.Millisecond, // a new fleet has no group to wait for
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
	// Wait until both know the strict leader: until then the fail mode answers.
	for deadline := time.Now().Add(10 * time.Second); min(nodes[0].Metrics().StrictLeaderChanges, nodes[1].Metrics().StrictLeaderChanges) == 0; {
		if time.Now().After(deadline) {
			log.Fatal("no strict leader")
		}
		time.Sleep(10 * time.Millisecond) // the poll interval
	}

	// The balancer sends one client's requests to a and b in turn, then
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
