package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// envoyTestConfig is a domain with a limit of 2 per minute.
const envoyTestConfig = `domain: edge
descriptors:
  - key: generic_key
    value: two
    rate_limit: {unit: minute, requests_per_unit: 2}
`

// envoyClient dials an agent's gRPC port and returns clients of Envoy's
// service and of sluice's Limiter.
func envoyClient(t *testing.T, addr string) (rlsv3.RateLimitServiceClient, sluicev1.LimiterClient) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn), sluicev1.NewLimiterClient(conn)
}

// shouldRateLimit asks for one descriptor generic_key=value of domain edge.
func shouldRateLimit(t *testing.T, c rlsv3.RateLimitServiceClient, value string) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: value}}}}})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// The agent serves Envoy's service beside sluice's own, on one port, with
// the Envoy file's limits among its rules, and counts it on /metrics.
func TestAgentServesEnvoy(t *testing.T) {
	sluiceFile := writeFile(t, "sluice.yaml", agentTestConfig)
	envoyFile := writeFile(t, "edge.yaml", envoyTestConfig)
	now := time.Unix(0, agentTestEpoch+int64(2*time.Second))
	a := startTestAgentArgs(t, func() time.Time { return now }, "--config", sluiceFile, "--envoy-config", envoyFile,
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--envoy-response-headers")
	var names []string
	for _, r := range a.node.Rules() {
		names = append(names, r.Name)
	}
	if got, want := strings.Join(names, ","), "fixed,sliding,edge.generic_key_two"; got != want {
		t.Errorf("rules %s, want %s", got, want)
	}
	rls, limiter := envoyClient(t, a.GRPCAddr())
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK,
		rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp := shouldRateLimit(t, rls, "two")
		if resp.GetOverallCode() != want {
			t.Fatalf("request %d: overall_code %v, want %v", i+1, resp.GetOverallCode(), want)
		}
		st := resp.GetStatuses()[0]
		if st.GetCurrentLimit().GetRequestsPerUnit() != 2 || st.GetCurrentLimit().GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE ||
			st.GetLimitRemaining() != uint32(max(0, 1-i)) || st.GetDurationUntilReset().AsDuration() != 58*time.Second {
			t.Errorf("request %d: status %v, want 2 per minute, %d left, 58s to reset", i+1, st, max(0, 1-i))
		}
		if len(resp.GetResponseHeadersToAdd()) != 3 {
			t.Errorf("request %d: headers %v, want 3", i+1, resp.GetResponseHeadersToAdd())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if d, err := limiter.Check(ctx, &sluicev1.CheckRequest{Rule: "fixed", Key: "k", Hits: 1}); err != nil || !d.GetAllowed() {
		t.Errorf("Limiter.Check beside the Envoy service: %v, %v", d, err)
	}
	code, body, err := httpGet(t, "http://"+a.HTTPAddr()+"/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	for _, want := range []string{`sluice_envoy_requests_total{code="OK"} 2`, `sluice_envoy_requests_total{code="OVER_LIMIT"} 1`,
		`sluice_members{state="alive"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestAgentEnvoyConfigErrors(t *testing.T) {
	a := writeFile(t, "a.yaml", envoyTestConfig)
	b := writeFile(t, "b.yaml", envoyTestConfig)
	bad := writeFile(t, "bad.yaml", "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	clash := writeFile(t, "sluice.yaml", "rules:\n  - name: edge.generic_key_two\n    count: 1\n    time_window: 1\n")
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"same domain twice", []string{"--envoy-config", a, "--envoy-config", b},
			fmt.Sprintf("sluice agent: %s: domain \"edge\" is also the domain of %s; one file per domain\n", b, a)},
		{"malformed file", []string{"--envoy-config", bad},
			fmt.Sprintf("sluice agent: %s:4: domain \"edge\": descriptor \"k\": unit must be one of second, minute, hour, day, week, month or year, got \"fortnight\"\n", bad)},
		{"rule name clash", []string{"--config", clash, "--envoy-config", a},
			fmt.Sprintf("sluice agent: %s:5: domain \"edge\": descriptor \"generic_key_two\": rule name \"edge.generic_key_two\" is also that of a rule in %s; rename one\n", a, clash)},
		{"headers without a file", []string{"--envoy-response-headers"},
			"sluice agent: --envoy-response-headers needs --envoy-config\nrun 'sluice agent --help' for usage\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCmd(context.Background(), append([]string{"agent", "--grpc-addr", "127.0.0.1:0"}, tt.args...)...)
			if code != 2 || stderr != tt.wantStderr {
				t.Errorf("exit %d, stderr\n got %q\nwant %q", code, stderr, tt.wantStderr)
			}
		})
	}
}

// A reload (SIGHUP) reads the Envoy files again, beside the built-in
// rules; a file that no longer parses leaves the running limits alone.
func TestAgentReloadsEnvoy(t *testing.T) {
	path := writeFile(t, "edge.yaml", envoyTestConfig)
	now := time.Unix(0, agentTestEpoch+int64(2*time.Second))
	a := startTestAgentArgs(t, func() time.Time { return now }, "--envoy-config", path, "--grpc-addr", "127.0.0.1:0")
	rls, _ := envoyClient(t, a.GRPCAddr())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name, file string
		// wantLimit is the limit generic_key=value reports, 0 for none.
		value     string
		wantLimit uint32
	}{
		{"new limit", strings.Replace(envoyTestConfig, "requests_per_unit: 2", "requests_per_unit: 7", 1), "two", 7},
		{"broken file", "domain: edge\ndescriptors: 5\n", "two", 7},
		{"new descriptor", envoyTestConfig + "  - key: generic_key\n    value: three\n    rate_limit: {unit: hour, requests_per_unit: 3}\n", "three", 3},
		{"descriptor removed", "domain: edge\n", "two", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			a.reload(context.Background(), defaultConfigName, log)
			resp := shouldRateLimit(t, rls, tt.value)
			if got := resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(); got != tt.wantLimit {
				t.Errorf("limit after reload %d, want %d (%v)", got, tt.wantLimit, resp)
			}
			names := map[string]bool{}
			for _, r := range a.node.Rules() {
				names[r.Name] = true
			}
			if !names["api"] || !names["burst"] {
				t.Errorf("rules after reload %v, want the built-in api and burst among them", names)
			}
		})
	}
}

// The example files of examples/envoy load, and an agent serves them.
func TestEnvoyExample(t *testing.T) {
	a := startTestAgentArgs(t, nil, "--envoy-config", "../../examples/envoy/ratelimit.yaml", "--grpc-addr", "127.0.0.1:0")
	rls, _ := envoyClient(t, a.GRPCAddr())
	resp := shouldRateLimit(t, rls, "checkout")
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() != 1000 {
		t.Errorf("generic_key=checkout: %v, want OK under 1000 per minute", resp)
	}
	envoy, err := os.ReadFile("../../examples/envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"envoy.service.ratelimit.v3", "domain: edge", "127.0.0.1", "port_value: 7070"} {
		if !strings.Contains(string(envoy), want) {
			t.Errorf("examples/envoy/envoy.yaml lacks %q", want)
		}
	}
}
