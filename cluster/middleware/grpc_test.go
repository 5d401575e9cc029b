package middleware

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/window"
)

// startGRPC serves the standard health service (a unary Check and a
// server stream, Watch) on 127.0.0.1 behind the interceptors, and returns
// a client of it. Cleanup stops the server and waits for it.
func startGRPC(t *testing.T, unary grpc.UnaryServerInterceptor, stream grpc.StreamServerInterceptor) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(unary), grpc.StreamInterceptor(stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return healthpb.NewHealthClient(conn)
}

// callCtx is a context for one call with the x-tenant metadata tenant
// (none for ""), ended when the test ends.
func callCtx(t *testing.T, tenant string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if tenant != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant)
	}
	return ctx
}

// retryInfo returns the wait of err's RetryInfo detail, and false without
// one.
func retryInfo(err error) (time.Duration, bool) {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// TestGRPCLoneNode sends three unary calls and opens three streams of one
// tenant each through a real node's rule of two per minute: the third of
// each is refused with codes.ResourceExhausted, told to come back when
// the fixed window ends, 50 s on.
func TestGRPCLoneNode(t *testing.T) {
	api := startNode(t, window.Rule{Name: "api", Count: 2, Window: time.Minute, Type: window.Fixed})
	var counts Counts
	key := GRPCKeyFromMetadata("X-Tenant")
	client := startGRPC(t,
		UnaryServerInterceptor(api, key, OnEvent(counts.Observe), Prefix("unary:")),
		StreamServerInterceptor(api, key, OnEvent(counts.Observe), Prefix("stream:")))

	wantRL := []string{`"api";r=1;t=50`, `"api";r=0;t=50`, `"api";r=0;t=50`}
	t.Run("unary", func(t *testing.T) {
		for i := range 3 {
			var header, trailer metadata.MD
			_, err := client.Check(callCtx(t, "t1"), &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
			checkGRPCAnswer(t, i, err, header, trailer, wantRL[i])
		}
	})
	t.Run("stream", func(t *testing.T) {
		for i := range 3 {
			ctx, cancel := context.WithCancel(callCtx(t, "t1"))
			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatalf("stream %d: Watch: %v", i+1, err)
			}
			_, err = stream.Recv()
			header, herr := stream.Header()
			if herr != nil {
				t.Fatalf("stream %d: Header: %v", i+1, herr)
			}
			cancel()
			var trailer metadata.MD
			if err != nil {
				trailer = stream.Trailer()
			}
			checkGRPCAnswer(t, i, err, header, trailer, wantRL[i])
		}
	})
	if got, want := counts.Stats(), (Stats{Admitted: 4, Refused: 2}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// checkGRPCAnswer checks the i'th (from 0) of three calls through a rule
// of two: two admitted, then a refusal to come back in 50 s.
func checkGRPCAnswer(t *testing.T, i int, err error, header, trailer metadata.MD, wantRL string) {
	t.Helper()
	if got := strings.Join(header.Get("ratelimit"), ","); got != wantRL {
		t.Errorf("call %d: ratelimit %q, want %q", i+1, got, wantRL)
	}
	if got := strings.Join(header.Get("ratelimit-policy"), ","); got != `"api";q=2;w=60` {
		t.Errorf("call %d: ratelimit-policy %q", i+1, got)
	}
	if i < 2 {
		if err != nil {
			t.Errorf("call %d: %v, want it admitted", i+1, err)
		}
		if got := header.Get("retry-after"); len(got) != 0 {
			t.Errorf("call %d: admitted with retry-after %q", i+1, got)
		}
		return
	}
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "retry in 50 s") {
		t.Errorf("call %d: %v, want ResourceExhausted naming the wait of 50 s", i+1, err)
	}
	if wait, ok := retryInfo(err); !ok || wait != 50*time.Second {
		t.Errorf("call %d: RetryInfo %v, %v; want 50s", i+1, wait, ok)
	}
	for _, md := range []struct {
		name string
		md   metadata.MD
	}{{"header", header}, {"trailer", trailer}} {
		if got := strings.Join(md.md.Get("retry-after"), ","); got != "50" {
			t.Errorf("call %d: retry-after in the %s %q, want 50", i+1, md.name, got)
		}
	}
}

// TestGRPCOutcomes runs a unary call and a stream through the
// interceptors for each way a call can end other than by a node's
// decision, against a fake limiter.
func TestGRPCOutcomes(t *testing.T) {
	// The principal an authentication interceptor would have found: here,
	// the tenant metadata, so that the test can send it.
	byPrincipal := GRPCKeyFromPrincipal(func(ctx context.Context) (string, bool) {
		if v := metadata.ValueFromIncomingContext(ctx, "x-tenant"); len(v) > 0 {
			return "user:" + v[0], true
		}
		return "", false
	})
	tests := []struct {
		name      string
		err       error
		key       GRPCKeyFunc
		tenant    string
		opts      []Option
		wantCode  codes.Code
		wantAsked string // "" when the limiter is not asked
		want      Outcome
	}{
		{"metadata key", nil, GRPCKeyFromMetadata("x-tenant"), "t1", nil, codes.OK, "t1", Admitted},
		{"peer key", nil, GRPCKeyFromPeer(), "", nil, codes.OK, "127.0.0.1", Admitted},
		{"principal key", nil, byPrincipal, "t1", []Option{Prefix("p:")}, codes.OK, "p:user:t1", Admitted},
		{"missing key passed", nil, GRPCKeyFromMetadata("x-tenant"), "", nil, codes.OK, "", NoKeyPassed},
		{"missing key refused", nil, GRPCKeyFromMetadata("x-tenant"), "", []Option{RefuseMissingKey()},
			codes.InvalidArgument, "", NoKeyRefused},
		{"error, fail open", errLimiterDown, GRPCKeyFromMetadata("x-tenant"), "t1", nil, codes.OK, "t1", FailedOpen},
		{"error, fail closed", errLimiterDown, GRPCKeyFromMetadata("x-tenant"), "t1", []Option{FailClosed()},
			codes.Unavailable, "t1", FailedClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeLimiter{name: "api", d: admit(10, 9, time.Second), err: tt.err}
			var counts Counts
			opts := append([]Option{OnEvent(counts.Observe)}, tt.opts...)
			client := startGRPC(t, UnaryServerInterceptor(f, tt.key, opts...), StreamServerInterceptor(f, tt.key, opts...))

			var header metadata.MD
			_, uerr := client.Check(callCtx(t, tt.tenant), &healthpb.HealthCheckRequest{}, grpc.Header(&header))
			ctx, cancel := context.WithCancel(callCtx(t, tt.tenant))
			defer cancel()
			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			_, serr := stream.Recv()
			for _, call := range []struct {
				kind string
				err  error
			}{{"unary", uerr}, {"stream", serr}} {
				if got := status.Code(call.err); got != tt.wantCode {
					t.Errorf("%s: %v, want %v", call.kind, call.err, tt.wantCode)
				}
			}
			if got := header.Get("ratelimit"); (tt.want == Admitted) != (len(got) == 1) {
				t.Errorf("%v: ratelimit %q", tt.want, got)
			}
			asked := f.asked()
			if tt.wantAsked == "" && len(asked) != 0 || tt.wantAsked != "" && (len(asked) != 2 || asked[0] != tt.wantAsked || asked[1] != tt.wantAsked) {
				t.Errorf("limiter asked about %q, want %q twice", asked, tt.wantAsked)
			}
			var want Stats
			switch tt.want {
			case Admitted:
				want.Admitted = 2
			case NoKeyPassed:
				want.NoKeyPassed = 2
			case NoKeyRefused:
				want.NoKeyRefused = 2
			case FailedOpen:
				want.FailedOpen = 2
			case FailedClosed:
				want.FailedClosed = 2
			}
			if got := counts.Stats(); got != want {
				t.Errorf("stats %+v, want %+v", got, want)
			}
		})
	}
}

// TestGRPCInterceptorWithoutServer: an interceptor called outside a
// server (as a unit test of a handler would) still decides; it only has
// no stream to set metadata on.
func TestGRPCInterceptorWithoutServer(t *testing.T) {
	f := &fakeLimiter{name: "api", d: refuse(10, 2500*time.Millisecond, time.Second)}
	key := func(ctx context.Context, method string) (string, bool) { return method, true }
	_, err := UnaryServerInterceptor(f, key)(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/svc/M"},
		func(ctx context.Context, req any) (any, error) {
			t.Error("a refused call reached its handler")
			return nil, nil
		})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != `sluice: rate limit "api" exceeded, retry in 3 s` {
		t.Errorf("got %v", err)
	}
	if wait, ok := retryInfo(err); !ok || wait != 2500*time.Millisecond {
		t.Errorf("RetryInfo %v, %v; want the exact wait, 2.5s", wait, ok)
	}
	if got := f.asked(); len(got) != 1 || got[0] != "/svc/M" {
		t.Errorf("asked about %q, want the method", got)
	}
}
