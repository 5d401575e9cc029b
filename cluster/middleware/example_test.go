package middleware_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/middleware"
	"github.com/sluicehq/sluice/window"
)

// A service puts a rule of two requests a minute per API key in front of
// its handlers. The node runs on a fixed clock, 10 s into a minute, so the
// refusal's wait (to the end of the window) is the same on every run.
func ExampleHTTP() {
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 12, 0, 10, 0, time.UTC)
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 2, Window: time.Minute, Type: window.Fixed}},
		Now:   func() time.Time { return at },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	api, err := node.Limiter("api")
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	limit := middleware.HTTP(api, middleware.KeyFromHeader("X-API-Key"))
	handler := limit(mux) // http.ListenAndServe(addr, handler)

	for range 3 {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-API-Key", "tenant-7")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
		for _, name := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := rec.Header().Get(name); v != "" {
				fmt.Printf("%s: %s\n", name, v)
			}
		}
	}
	// Output:
	// 200 hello
	// RateLimit-Policy: "api";q=2;w=60
	// RateLimit: "api";r=1;t=50
	// 200 hello
	// RateLimit-Policy: "api";q=2;w=60
	// RateLimit: "api";r=0;t=50
	// 429 rate limit exceeded, retry in 50 s
	// RateLimit-Policy: "api";q=2;w=60
	// RateLimit: "api";r=0;t=50
	// Retry-After: 50
}

// A gRPC server checks unary calls and streams alike, here keyed by the
// caller's x-api-key metadata; a refusal is codes.ResourceExhausted, with
// retry-after in its metadata.
func ExampleUnaryServerInterceptor() {
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 12, 0, 10, 0, time.UTC)
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 2, Window: time.Minute, Type: window.Fixed}},
		Now:   func() time.Time { return at },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	api, err := node.Limiter("api")
	if err != nil {
		log.Fatal(err)
	}

	key := middleware.GRPCKeyFromMetadata("x-api-key")
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(middleware.UnaryServerInterceptor(api, key)),
		grpc.ChainStreamInterceptor(middleware.StreamServerInterceptor(api, key)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		<-served
	}()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	callCtx := metadata.AppendToOutgoingContext(ctx, "x-api-key", "tenant-7")
	for range 3 {
		var header metadata.MD
		_, err := client.Check(callCtx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		fmt.Println(status.Code(err), header.Get("ratelimit"), header.Get("retry-after"))
	}
	// Output:
	// OK ["api";r=1;t=50] []
	// OK ["api";r=0;t=50] []
	// ResourceExhausted ["api";r=0;t=50] [50]
}

// Behind a load balancer the peer is the balancer: KeyFromClientIP trusts
// the balancer's network and takes the client from X-Forwarded-For, right
// to left, skipping trusted hops.
func ExampleKeyFromClientIP() {
	key := middleware.KeyFromClientIP(netipPrefix("10.0.0.0/8"))
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.2:36000"
	req.Header.Set("X-Forwarded-For", "1.2.3.4, 198.51.100.7, 10.0.0.9")
	fmt.Println(key(req))
	// Output: 198.51.100.7 true
}

// Counts gathers the outcomes for a service's metrics.
func ExampleCounts() {
	var counts middleware.Counts
	f := fixedLimiter{cluster.Decision{Allowed: true, Limit: 10, Remaining: 9}}
	handler := middleware.HTTP(f, middleware.KeyFromHeader("X-API-Key"), middleware.OnEvent(counts.Observe))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, key := range []string{"a", "", "b"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-API-Key", key)
		handler.ServeHTTP(httptest.NewRecorder(), req)
	}
	fmt.Printf("%+v\n", counts.Stats())
	// Output: {Admitted:2 Refused:0 NoKeyPassed:1 NoKeyRefused:0 FailedOpen:0 FailedClosed:0}
}
