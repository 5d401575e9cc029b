package envoyrls

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
)

// testEpoch is a boundary of every unit's window up to an hour, far from
// zero.
const testEpoch = int64(1_800_000_000) * int64(time.Second)

// testClock is a clock the test moves by hand.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Set(d time.Duration)     { c.ns.Store(testEpoch + int64(d)) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// serverConfig is the domain the service tests run against.
const serverConfig = `domain: edge
descriptors:
  - key: generic_key
    value: two_per_minute
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: generic_key
    value: ten_per_minute
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: ldap
    rate_limit: {unlimited: true}
  - key: sliding
    window_type: sliding
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: user
    descriptors:
      - key: tier
        value: gold
        rate_limit:
          name: gold
          unit: minute
          requests_per_unit: 5
      - key: tier
        value: vip
        rate_limit:
          replaces: [{name: gold}]
          unit: minute
          requests_per_unit: 100
`

// rlsFixture is a lone node serving the Envoy service over gRPC on
// loopback, with its clock.
type rlsFixture struct {
	client rlsv3.RateLimitServiceClient
	node   *cluster.Node
	server *Server
	clock  *testClock
}

// startRLS starts a node with config's limits and opts, at 30s past a
// minute's start.
func startRLS(t *testing.T, config string, opts Options) *rlsFixture {
	t.Helper()
	return startRLSWith(t, config, opts, nil)
}

// startRLSWith is startRLS with the node's config edited by tweak.
func startRLSWith(t *testing.T, config string, opts Options, tweak func(*cluster.Config)) *rlsFixture {
	t.Helper()
	dom, err := Parse("edge.yaml", []byte(config))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	limits, err := NewLimits(dom)
	if err != nil {
		t.Fatalf("NewLimits: %v", err)
	}
	fx := &rlsFixture{clock: &testClock{}}
	fx.clock.Set(30 * time.Second)
	opts.Now = fx.clock.Now
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := cluster.Config{
		Name: "rls-test", Rules: limits.Rules(), GRPCAddr: "127.0.0.1:0", Now: fx.clock.Now,
		Logger: opts.Logger,
		GRPCServices: []func(grpc.ServiceRegistrar, *cluster.Node){func(s grpc.ServiceRegistrar, n *cluster.Node) {
			fx.server = NewServer(n, limits, opts)
			fx.server.Register(s)
		}},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	node, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { node.Close() })
	fx.node = node
	conn, err := grpc.NewClient(node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	fx.client = rlsv3.NewRateLimitServiceClient(conn)
	return fx
}

// desc builds a request descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// ask sends a request for domain "edge" with descs.
func (fx *rlsFixture) ask(t *testing.T, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := fx.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// statusWant is what a test expects of one descriptor's status.
type statusWant struct {
	code      rlsv3.RateLimitResponse_Code
	limit     uint32 // requests_per_unit; 0 with noLimit
	unit      rlsv3.RateLimitResponse_RateLimit_Unit
	remaining uint32
	reset     time.Duration
	noLimit   bool // no current_limit
}

func checkStatus(t *testing.T, i int, got *rlsv3.RateLimitResponse_DescriptorStatus, want statusWant) {
	t.Helper()
	if got.GetCode() != want.code {
		t.Errorf("statuses[%d].code = %v, want %v", i, got.GetCode(), want.code)
	}
	if got.GetLimitRemaining() != want.remaining {
		t.Errorf("statuses[%d].limit_remaining = %d, want %d", i, got.GetLimitRemaining(), want.remaining)
	}
	if want.noLimit {
		if got.GetCurrentLimit() != nil {
			t.Errorf("statuses[%d].current_limit = %v, want none", i, got.GetCurrentLimit())
		}
		return
	}
	if cl := got.GetCurrentLimit(); cl.GetRequestsPerUnit() != want.limit || cl.GetUnit() != want.unit {
		t.Errorf("statuses[%d].current_limit = %v, want %d per %v", i, cl, want.limit, want.unit)
	}
	if r := got.GetDurationUntilReset().AsDuration(); r != want.reset {
		t.Errorf("statuses[%d].duration_until_reset = %v, want %v", i, r, want.reset)
	}
}

const (
	ok      = rlsv3.RateLimitResponse_OK
	over    = rlsv3.RateLimitResponse_OVER_LIMIT
	minute  = rlsv3.RateLimitResponse_RateLimit_MINUTE
	second  = rlsv3.RateLimitResponse_RateLimit_SECOND
	maxUint = uint32(math.MaxUint32)
	halfMin = 30 * time.Second
)

func TestShouldRateLimitTwoPerMinute(t *testing.T) {
	fx := startRLS(t, serverConfig, Options{})
	tests := []struct {
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{{ok, 1}, {ok, 0}, {over, 0}}
	for i, tt := range tests {
		resp := fx.ask(t, desc("generic_key", "two_per_minute"))
		if resp.GetOverallCode() != tt.code {
			t.Fatalf("request %d: overall_code %v, want %v", i+1, resp.GetOverallCode(), tt.code)
		}
		if len(resp.GetStatuses()) != 1 {
			t.Fatalf("request %d: %d statuses, want 1", i+1, len(resp.GetStatuses()))
		}
		checkStatus(t, 0, resp.GetStatuses()[0], statusWant{code: tt.code, limit: 2, unit: minute,
			remaining: tt.remaining, reset: halfMin})
	}
	// The next minute admits again.
	fx.clock.Advance(halfMin)
	if got := fx.ask(t, desc("generic_key", "two_per_minute")).GetOverallCode(); got != ok {
		t.Errorf("next minute: overall_code %v, want OK", got)
	}
}

// strictConfig holds two strict limits, decided by the Raft log.
const strictConfig = `domain: edge
descriptors:
  - key: pay
    sync_interval: -1
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: refund
    sync_interval: -1
    rate_limit: {unit: minute, requests_per_unit: 10}
`

// Two strict descriptors in one request are all or nothing too: one full
// refuses the request, and the log gives back what the other counted.
func TestShouldRateLimitStrictAllOrNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("elects a strict leader")
	}
	fx := startRLSWith(t, strictConfig, Options{}, func(c *cluster.Config) {
		c.Strict, c.StrictTimeout = strict.Mode{}, time.Minute
	})
	pay, refund := desc("pay", "acct-1"), desc("refund", "acct-1")
	for range 2 {
		if got := fx.ask(t, pay).GetOverallCode(); got != ok {
			t.Fatalf("filling pay: overall_code %v, want OK", got)
		}
	}
	resp := fx.ask(t, refund, pay)
	if resp.GetOverallCode() != over {
		t.Fatalf("overall_code %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	checkStatus(t, 0, resp.GetStatuses()[0], statusWant{code: ok, limit: 10, unit: minute, remaining: 10, reset: halfMin})
	checkStatus(t, 1, resp.GetStatuses()[1], statusWant{code: over, limit: 2, unit: minute, remaining: 0, reset: halfMin})
	// Alone, refund spends: the log holds none of the refused request's hit.
	resp = fx.ask(t, refund)
	checkStatus(t, 0, resp.GetStatuses()[0], statusWant{code: ok, limit: 10, unit: minute, remaining: 9, reset: halfMin})
}

// One descriptor full refuses the request, and the other spends nothing.
func TestShouldRateLimitAllOrNothing(t *testing.T) {
	fx := startRLS(t, serverConfig, Options{})
	full, other := desc("generic_key", "two_per_minute"), desc("generic_key", "ten_per_minute")
	fx.ask(t, full)
	fx.ask(t, full)
	resp := fx.ask(t, other, full)
	if resp.GetOverallCode() != over {
		t.Fatalf("overall_code %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	// The other descriptor's hit was given back: it reports its room as
	// before the request.
	checkStatus(t, 0, resp.GetStatuses()[0], statusWant{code: ok, limit: 10, unit: minute, remaining: 10, reset: halfMin})
	checkStatus(t, 1, resp.GetStatuses()[1], statusWant{code: over, limit: 2, unit: minute, remaining: 0, reset: halfMin})
	rule := ruleName("edge", "generic_key_ten_per_minute")
	own, _, err := fx.node.View(rule, "generic_key=ten_per_minute")
	if err != nil {
		t.Fatal(err)
	}
	if own.Curr != 0 {
		t.Errorf("the other descriptor's count = %d after the refused request, want 0", own.Curr)
	}
	// Alone, it spends.
	resp = fx.ask(t, other)
	checkStatus(t, 0, resp.GetStatuses()[0], statusWant{code: ok, limit: 10, unit: minute, remaining: 9, reset: halfMin})
}

func TestShouldRateLimitStatuses(t *testing.T) {
	tests := []struct {
		name    string
		descs   []*ratelimitv3.RateLimitDescriptor
		hits    uint32 // the request's hits_addend
		overall rlsv3.RateLimitResponse_Code
		want    []statusWant
	}{
		{"unknown descriptor", []*ratelimitv3.RateLimitDescriptor{desc("nope", "x")}, 0, ok,
			[]statusWant{{code: ok, noLimit: true}}},
		{"deeper than any limit", []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "1.2.3.4", "path", "/")}, 0, ok,
			[]statusWant{{code: ok, noLimit: true}}},
		{"limit below the request's depth", []*ratelimitv3.RateLimitDescriptor{desc("user", "u1")}, 0, ok,
			[]statusWant{{code: ok, noLimit: true}}},
		{"empty descriptor", []*ratelimitv3.RateLimitDescriptor{{}}, 0, ok, []statusWant{{code: ok, noLimit: true}}},
		{"per address", []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.0.0.1")}, 0, ok,
			[]statusWant{{code: ok, limit: 3, unit: second, remaining: 2, reset: time.Second}}},
		{"blocked address", []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "50.0.0.5")}, 0, over,
			[]statusWant{{code: over, limit: 0, unit: second, remaining: 0, reset: time.Second}}},
		{"unlimited", []*ratelimitv3.RateLimitDescriptor{desc("ldap", "x")}, 0, ok,
			[]statusWant{{code: ok, remaining: maxUint, noLimit: true}}},
		{"hits_addend", []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.0.0.2")}, 2, ok,
			[]statusWant{{code: ok, limit: 3, unit: second, remaining: 1, reset: time.Second}}},
		{"hits_addend above the limit", []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.0.0.3")}, 4, over,
			[]statusWant{{code: over, limit: 3, unit: second, remaining: 0, reset: time.Second}}},
		{"per-descriptor hits_addend", []*ratelimitv3.RateLimitDescriptor{
			{Entries: desc("remote_address", "10.0.0.4").Entries, HitsAddend: wrapperspb.UInt64(0)},
			{Entries: desc("remote_address", "10.0.0.5").Entries, HitsAddend: wrapperspb.UInt64(3)},
		}, 1, ok, []statusWant{
			{code: ok, limit: 3, unit: second, remaining: 3, reset: time.Second},
			{code: ok, limit: 3, unit: second, remaining: 0, reset: time.Second},
		}},
		{"replaces", []*ratelimitv3.RateLimitDescriptor{desc("user", "u1", "tier", "gold"), desc("user", "u1", "tier", "vip")}, 0, ok,
			[]statusWant{{code: ok, noLimit: true}, {code: ok, limit: 100, unit: minute, remaining: 99, reset: halfMin}}},
		// A sliding window's hit weighs on the next window too: the whole
		// limit is free again 90s after a hit 30s into a minute.
		{"sliding", []*ratelimitv3.RateLimitDescriptor{desc("sliding", "s1")}, 0, ok,
			[]statusWant{{code: ok, limit: 2, unit: minute, remaining: 1, reset: 90 * time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := startRLS(t, serverConfig, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := fx.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: tt.descs, HitsAddend: tt.hits})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetOverallCode() != tt.overall {
				t.Errorf("overall_code %v, want %v", resp.GetOverallCode(), tt.overall)
			}
			if len(resp.GetStatuses()) != len(tt.want) {
				t.Fatalf("%d statuses, want %d", len(resp.GetStatuses()), len(tt.want))
			}
			for i, w := range tt.want {
				checkStatus(t, i, resp.GetStatuses()[i], w)
			}
			if resp.GetResponseHeadersToAdd() != nil {
				t.Errorf("response_headers_to_add = %v without ResponseHeaders", resp.GetResponseHeadersToAdd())
			}
		})
	}
}

func TestShouldRateLimitUnknownDomain(t *testing.T) {
	fx := startRLS(t, serverConfig, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := fx.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "other",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("generic_key", "two_per_minute")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOverallCode() != ok || len(resp.GetStatuses()) != 1 || resp.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Errorf("got %v, want OK with one status and no limit", resp)
	}
}

// A shadow_mode descriptor over its limit is reported OK and never refuses
// the request; the overall answer follows the other descriptors.
func TestShouldRateLimitShadowMode(t *testing.T) {
	fx := startRLS(t, serverConfig, Options{})
	shadow := desc("shadow", "s1")
	resp := fx.ask(t, shadow)
	checkStatus(t, 0, resp.GetStatuses()[0], statusWant{code: ok, limit: 1, unit: minute, remaining: 0, reset: halfMin})
	for i := range 2 {
		resp = fx.ask(t, shadow, desc("generic_key", "ten_per_minute"))
		if resp.GetOverallCode() != ok {
			t.Fatalf("over-limit shadow request %d: overall_code %v, want OK", i+1, resp.GetOverallCode())
		}
		checkStatus(t, 0, resp.GetStatuses()[0], statusWant{code: ok, limit: 1, unit: minute, remaining: 0, reset: halfMin})
		checkStatus(t, 1, resp.GetStatuses()[1], statusWant{code: ok, limit: 10, unit: minute, remaining: uint32(9 - i), reset: halfMin})
	}
	if got := fx.server.metrics.shadowOverLimit.Load(); got != 2 {
		t.Errorf("shadow over-limit count %d, want 2", got)
	}
	// A refused request spends no shadow hit either.
	fx.clock.Advance(halfMin)
	fx.ask(t, desc("generic_key", "two_per_minute"))
	fx.ask(t, desc("generic_key", "two_per_minute"))
	resp = fx.ask(t, shadow, desc("generic_key", "two_per_minute"))
	if resp.GetOverallCode() != over {
		t.Fatalf("overall_code %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	checkStatus(t, 0, resp.GetStatuses()[0], statusWant{code: ok, limit: 1, unit: minute, remaining: 1, reset: time.Minute})
	var b strings.Builder
	if err := fx.server.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`sluice_envoy_requests_total{code="OK"} 5`,
		`sluice_envoy_requests_total{code="OVER_LIMIT"} 1`,
		"sluice_envoy_shadow_over_limit_total 2",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}

func TestShouldRateLimitResponseHeaders(t *testing.T) {
	fx := startRLS(t, serverConfig, Options{ResponseHeaders: true})
	resp := fx.ask(t, desc("generic_key", "ten_per_minute"), desc("generic_key", "two_per_minute"), desc("ldap", "x"))
	got := map[string]string{}
	for _, h := range resp.GetResponseHeadersToAdd() {
		got[h.GetKey()] = h.GetValue()
	}
	want := map[string]string{"RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "30"}
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	// No limit matched: no headers.
	if h := fx.ask(t, desc("nope", "x")).GetResponseHeadersToAdd(); h != nil {
		t.Errorf("headers %v for a request no limit matched, want none", h)
	}
}

func TestShouldRateLimitErrors(t *testing.T) {
	fx := startRLS(t, serverConfig, Options{})
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		code codes.Code
		msg  string // in the message
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "b")}},
			codes.InvalidArgument, "domain: must not be empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "edge"}, codes.InvalidArgument, "descriptors: must not be empty"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: func() []*ratelimitv3.RateLimitDescriptor {
			ds := make([]*ratelimitv3.RateLimitDescriptor, MaxDescriptors+1)
			for i := range ds {
				ds[i] = desc("a", "b")
			}
			return ds
		}()}, codes.InvalidArgument, "descriptors: 1001 descriptors in a request, at most 1000"},
		{"limit override", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			desc("a", "b"), {Entries: desc("a", "b").Entries, Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}}}},
			codes.InvalidArgument, "descriptors[1].limit"},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: desc("a", "b").Entries, IsNegativeHits: true}}},
			codes.InvalidArgument, "descriptors[0].is_negative_hits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := fx.client.ShouldRateLimit(ctx, tt.req)
			if st := status.Convert(err); st.Code() != tt.code || !strings.Contains(st.Message(), tt.msg) {
				t.Errorf("error %v, want %v containing %q", err, tt.code, tt.msg)
			}
		})
	}
	if got := fx.server.metrics.errors.Load(); got != uint64(len(tests)) {
		t.Errorf("error count %d, want %d", got, len(tests))
	}
}

// A closed node answers Unavailable, and a rule gone from the node (a
// reload under way) too; neither panics.
func TestShouldRateLimitNodeErrors(t *testing.T) {
	fx := startRLS(t, serverConfig, Options{})
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("generic_key", "two_per_minute")}}
	other, err := Parse("other.yaml", []byte("domain: edge\ndescriptors:\n  - key: generic_key\n    value: two_per_minute\n    rate_limit: {unit: hour, requests_per_unit: 2}\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	otherLimits, err := NewLimits(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.node.Reload(context.Background(), otherLimits.Rules()[1:]); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.server.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.Unavailable {
		t.Errorf("rule removed: error %v, want Unavailable", err)
	}
	fx.node.Close()
	if _, err := fx.server.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.Unavailable {
		t.Errorf("closed node: error %v, want Unavailable", err)
	}
}

// statusOf maps the node's errors as the Limiter service does.
func TestStatusOf(t *testing.T) {
	tests := []struct {
		err  error
		want codes.Code
	}{
		{cluster.ErrClosed, codes.Unavailable},
		{cluster.ErrUnknownRule, codes.Unavailable},
		{cluster.ErrOutcomeUnknown, codes.Aborted},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{io.ErrUnexpectedEOF, codes.Internal},
	}
	for _, tt := range tests {
		if got := status.Code(statusOf(tt.err)); got != tt.want {
			t.Errorf("statusOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
