package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// svcClock is a clock the test moves by hand, in Unix nanoseconds.
type svcClock struct{ ns atomic.Int64 }

func (c *svcClock) Now() int64              { return c.ns.Load() }
func (c *svcClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// svcEpoch is a window boundary for every window the tests use (a multiple
// of 10s), far from zero.
const svcEpoch = int64(1_800_000_000) * int64(time.Second)

var (
	svcFixed = window.Rule{Name: "fixed", Count: 3, Window: 10 * time.Second,
		Type: window.Fixed, SyncInterval: 200 * time.Millisecond}
	svcSliding = window.Rule{Name: "sliding", Count: 3, Window: 10 * time.Second,
		Type: window.Sliding, SyncInterval: 200 * time.Millisecond}
)

// startLimiterService starts a node with rules on a fake clock, serves it
// over gRPC on a loopback port and returns a client and the clock.
func startLimiterService(t *testing.T, rules ...window.Rule) (sluicev1.LimiterClient, *svcClock) {
	t.Helper()
	client, clock, _ := startLimiterNode(t, rules...)
	return client, clock
}

// startLimiterNode is startLimiterService that also returns the node.
func startLimiterNode(t *testing.T, rules ...window.Rule) (sluicev1.LimiterClient, *svcClock, *Node) {
	t.Helper()
	clock := &svcClock{}
	clock.ns.Store(svcEpoch)
	node, err := Start(context.Background(), Config{Name: "svc-test", Rules: rules, Now: clockOf(clock.Now)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { node.Close() })

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	sluicev1.RegisterLimiterServer(srv, NewLimiterService(node))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return sluicev1.NewLimiterClient(conn), clock, node
}

func TestLimiterServiceCheckSpendsThenRefuses(t *testing.T) {
	tests := []struct {
		name  string
		rule  window.Rule
		start time.Duration // into the window
		// wantRetry is the refused client's wait, when it is known in
		// closed form.
		wantRetry time.Duration
	}{
		// A fixed window waits for the boundary.
		{name: "fixed", rule: svcFixed, start: 2 * time.Second, wantRetry: 8 * time.Second},
		// A sliding window waits past the boundary until the 3 spent hits
		// have decayed to 2: a third of the next window.
		{name: "sliding", rule: svcSliding, start: 2 * time.Second, wantRetry: 8*time.Second + 3333333334},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, clock := startLimiterService(t, tt.rule)
			clock.Advance(tt.start)
			ctx := context.Background()
			check := func(hits int64) *sluicev1.CheckResponse {
				t.Helper()
				resp, err := client.Check(ctx, &sluicev1.CheckRequest{Rule: tt.rule.Name, Key: "user:42", Hits: hits})
				if err != nil {
					t.Fatalf("Check(hits=%d): %v", hits, err)
				}
				return resp
			}

			for i := range tt.rule.Count {
				resp := check(1)
				if !resp.GetAllowed() || resp.GetLimit() != tt.rule.Count || resp.GetRemaining() != tt.rule.Count-1-i {
					t.Fatalf("hit %d: got allowed=%v limit=%d remaining=%d, want allowed limit=%d remaining=%d",
						i, resp.GetAllowed(), resp.GetLimit(), resp.GetRemaining(), tt.rule.Count, tt.rule.Count-1-i)
				}
				if got := resp.GetRetryAfter().AsDuration(); got != 0 {
					t.Fatalf("hit %d: retry_after = %v for an admitted hit, want 0", i, got)
				}
				if got := resp.GetResetAfter().AsDuration(); got <= 0 {
					t.Fatalf("hit %d: reset_after = %v, want > 0", i, got)
				}
			}

			refused := check(1)
			retry := refused.GetRetryAfter().AsDuration()
			if refused.GetAllowed() || refused.GetRemaining() != 0 || retry <= 0 {
				t.Fatalf("spent: got allowed=%v remaining=%d retry_after=%v, want refused, 0, > 0",
					refused.GetAllowed(), refused.GetRemaining(), retry)
			}
			if retry != tt.wantRetry {
				t.Fatalf("retry_after = %v, want %v", retry, tt.wantRetry)
			}

			// Honest retry_after: a nanosecond early is still refused, on
			// time is admitted.
			clock.Advance(retry - time.Nanosecond)
			if early := check(0); early.GetAllowed() {
				t.Fatalf("1ns before retry_after: admitted, want refused")
			}
			clock.Advance(time.Nanosecond)
			if onTime := check(1); !onTime.GetAllowed() {
				t.Fatalf("at retry_after: refused (retry_after=%v), want admitted", onTime.GetRetryAfter().AsDuration())
			}
		})
	}
}

func TestLimiterServiceCheckErrors(t *testing.T) {
	client, _ := startLimiterService(t, svcFixed)
	tests := []struct {
		name     string
		req      *sluicev1.CheckRequest
		wantCode codes.Code
		wantMsg  string
	}{
		{"unknown rule", &sluicev1.CheckRequest{Rule: "nope", Key: "k", Hits: 1}, codes.NotFound, `rule "nope"`},
		{"empty rule", &sluicev1.CheckRequest{Key: "k", Hits: 1}, codes.NotFound, `rule ""`},
		{"empty key", &sluicev1.CheckRequest{Rule: "fixed", Hits: 1}, codes.InvalidArgument, "key must not be empty"},
		{"key too long", &sluicev1.CheckRequest{Rule: "fixed", Key: strings.Repeat("k", 1025), Hits: 1},
			codes.InvalidArgument, "key too long: 1025 bytes"},
		{"negative hits", &sluicev1.CheckRequest{Rule: "fixed", Key: "k", Hits: -1}, codes.InvalidArgument, "hits must be ≥ 0, got -1"},
		{"hits over count", &sluicev1.CheckRequest{Rule: "fixed", Key: "k", Hits: 4}, codes.InvalidArgument, "hits 4"},
		{"empty request", &sluicev1.CheckRequest{}, codes.NotFound, "unknown rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Check(context.Background(), tt.req)
			st, _ := status.FromError(err)
			if st.Code() != tt.wantCode || !strings.Contains(st.Message(), tt.wantMsg) {
				t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
			}
		})
	}
}

// TestLimiterServiceRefusesParts: the part of a rule with several limits
// that the counters hold under the name "burst#2" is no rule a client may
// check alone, which would pass the rule's first limit by.
func TestLimiterServiceRefusesParts(t *testing.T) {
	burst := window.Rule{Name: "burst", Count: 2, Window: time.Second, Type: window.Fixed, SyncInterval: 200 * time.Millisecond,
		Also: []window.Limit{{Count: 10, Window: time.Minute}}}
	client, _, node := startLimiterNode(t, burst)
	ctx := context.Background()
	_, err := client.Check(ctx, &sluicev1.CheckRequest{Rule: "burst#2", Key: "k", Hits: 1})
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != `unknown rule "burst#2"` {
		t.Errorf("Check of a part: %v, want NotFound naming it", err)
	}
	_, err = client.CheckBatch(ctx, &sluicev1.CheckBatchRequest{Checks: []*sluicev1.CheckRequest{
		{Rule: "burst", Key: "k", Hits: 1}, {Rule: "burst#2", Key: "k", Hits: 1}}})
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != `checks[1]: unknown rule "burst#2"` {
		t.Errorf("CheckBatch with a part: %v, want NotFound naming it", err)
	}
	if _, err := node.Limiter("burst#2"); !errors.Is(err, ErrUnknownRule) {
		t.Errorf("Limiter of a part: %v, want ErrUnknownRule", err)
	}
	if d, err := client.Check(ctx, &sluicev1.CheckRequest{Rule: "burst", Key: "k", Hits: 0}); err != nil || d.GetRemaining() != 2 {
		t.Errorf("the rule: %v, %v; want 2 left, nothing spent", d, err)
	}
}

func TestLimiterServiceCheckBatch(t *testing.T) {
	req := func(rule, key string, hits int64) *sluicev1.CheckRequest {
		return &sluicev1.CheckRequest{Rule: rule, Key: key, Hits: hits}
	}
	tests := []struct {
		name        string
		checks      []*sluicev1.CheckRequest
		wantAllowed []bool
		wantCode    codes.Code
		wantMsg     string
	}{
		{name: "empty", checks: nil, wantAllowed: []bool{}},
		{
			name: "in order until spent",
			checks: []*sluicev1.CheckRequest{
				req("fixed", "a", 2), req("sliding", "a", 3), req("fixed", "a", 2),
				req("fixed", "b", 3), req("fixed", "a", 1), req("sliding", "a", 0),
			},
			wantAllowed: []bool{true, true, false, true, true, false},
		},
		{
			name:     "bad item fails the batch",
			checks:   []*sluicev1.CheckRequest{req("fixed", "a", 1), req("fixed", "a", 1), req("fixed", "", 1)},
			wantCode: codes.InvalidArgument, wantMsg: "checks[2]: key must not be empty",
		},
		{
			name:     "unknown rule fails the batch",
			checks:   []*sluicev1.CheckRequest{req("fixed", "a", 1), req("other", "a", 1)},
			wantCode: codes.NotFound, wantMsg: `checks[1]: unknown rule "other"`,
		},
		{
			name:     "hits over count fails the batch",
			checks:   []*sluicev1.CheckRequest{req("sliding", "a", 4)},
			wantCode: codes.InvalidArgument, wantMsg: "checks[0]: hits exceed",
		},
		{
			name:     "too many checks",
			checks:   make([]*sluicev1.CheckRequest, MaxBatchChecks+1),
			wantCode: codes.InvalidArgument, wantMsg: "at most 1000",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, _ := startLimiterService(t, svcFixed, svcSliding)
			ctx := context.Background()
			for i := range tt.checks {
				if tt.checks[i] == nil {
					tt.checks[i] = req("fixed", "a", 1)
				}
			}
			resp, err := client.CheckBatch(ctx, &sluicev1.CheckBatchRequest{Checks: tt.checks})
			if tt.wantCode != codes.OK {
				st, _ := status.FromError(err)
				if st.Code() != tt.wantCode || !strings.Contains(st.Message(), tt.wantMsg) {
					t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
				}
				// Nothing was spent: the whole count is still there.
				after, err := client.Check(ctx, req("fixed", "a", 0))
				if err != nil {
					t.Fatal(err)
				}
				if after.GetRemaining() != svcFixed.Count {
					t.Fatalf("after a failed batch remaining = %d, want %d", after.GetRemaining(), svcFixed.Count)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckBatch: %v", err)
			}
			if len(resp.GetResults()) != len(tt.wantAllowed) {
				t.Fatalf("got %d results, want %d", len(resp.GetResults()), len(tt.wantAllowed))
			}
			for i, r := range resp.GetResults() {
				if r.GetAllowed() != tt.wantAllowed[i] {
					t.Errorf("results[%d].allowed = %v, want %v", i, r.GetAllowed(), tt.wantAllowed[i])
				}
				if !r.GetAllowed() && r.GetRetryAfter().AsDuration() <= 0 {
					t.Errorf("results[%d]: refused with retry_after %v, want > 0", i, r.GetRetryAfter().AsDuration())
				}
			}
		})
	}
}

// TestLimiterServiceNilInput calls the service directly with what gRPC never
// sends but an in-process caller might: it must answer, not panic.
func TestLimiterServiceNilInput(t *testing.T) {
	node, err := Start(context.Background(), Config{Name: "nil", Rules: []window.Rule{svcFixed}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	svc := NewLimiterService(node)
	ctx := context.Background()
	tests := []struct {
		name     string
		call     func() error
		wantCode codes.Code
	}{
		{"nil check", func() error { _, err := svc.Check(ctx, nil); return err }, codes.InvalidArgument},
		{"nil batch", func() error { _, err := svc.CheckBatch(ctx, nil); return err }, codes.OK},
		{"nil item", func() error {
			_, err := svc.CheckBatch(ctx, &sluicev1.CheckBatchRequest{Checks: []*sluicev1.CheckRequest{nil}})
			return err
		}, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(tt.call()); got != tt.wantCode {
				t.Fatalf("code = %v, want %v", got, tt.wantCode)
			}
		})
	}
}

// TestStatusForEveryError checks the gRPC code each error of Allow maps to,
// wrapped as Allow wraps them.
func TestStatusForEveryError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("%w %q", ErrUnknownRule, "api"), codes.NotFound},
		{counter.UnknownRule("api\xff"), codes.InvalidArgument},
		{fmt.Errorf("%w, got byte 0xFF at offset 0", ErrKeyNotUTF8), codes.InvalidArgument},
		{fmt.Errorf("key %q: %w", "", ErrEmptyKey), codes.InvalidArgument},
		{fmt.Errorf("hits 7: %w", ErrHitsOverCount), codes.InvalidArgument},
		{ErrClosed, codes.Unavailable},
		{fmt.Errorf("rule %q: %w", "ledger", ErrOutcomeUnknown), codes.Aborted},
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("strict: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{errors.New("something else"), codes.Internal},
	} {
		if got := status.Code(statusFor(tc.err, "")); got != tc.want {
			t.Errorf("statusFor(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
