package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// envoyFleetConfig holds two limits a request can hit at once, as
// Envoy's rate_limits actions send them: checkout 10 a minute, and each
// client address 12 a minute.
const envoyFleetConfig = `domain: edge
descriptors:
  - key: generic_key
    value: checkout
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 12}
`

// TestAgentFleetServesEnvoy drives ShouldRateLimit as Envoy does — a
// domain, two descriptors, hits_addend — round-robin over a 3-agent fleet:
// the fleet counts as one, OVER_LIMIT when one descriptor is over, and a
// refused request spends on neither descriptor.
func TestAgentFleetServesEnvoy(t *testing.T) {
	envoyFile := writeFile(t, "edge.yaml", envoyFleetConfig)
	now := time.Unix(0, agentTestEpoch+int64(2*time.Second))
	clock := func() time.Time { return now }
	common := []string{"--envoy-config", envoyFile, "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--shutdown-timeout", "2s"}
	first := startTestAgentArgs(t, clock, append(common, "--name", "edge-a")...)
	agents := []*agent{first}
	for _, name := range []string{"edge-b", "edge-c"} {
		agents = append(agents, startTestAgentArgs(t, clock, append(common, "--name", name, "--join", first.GossipAddr())...))
	}
	for _, a := range agents {
		waitUntil(t, patience, a.node.Name()+" streams to both peers", func() (bool, string) {
			p := a.node.Metrics().Peers
			return p == 2, fmt.Sprintf("%d peers", p)
		})
	}
	var clients []rlsv3.RateLimitServiceClient
	for _, a := range agents {
		c, _ := envoyClient(t, a.GRPCAddr())
		clients = append(clients, c)
	}
	checkout := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "checkout"}}}
	client := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "198.51.100.7"}}}

	tests := []struct {
		descs     []*ratelimitv3.RateLimitDescriptor
		hits      uint32
		want      rlsv3.RateLimitResponse_Code
		remaining []uint32 // per descriptor
	}{
		{[]*ratelimitv3.RateLimitDescriptor{checkout, client}, 3, rlsv3.RateLimitResponse_OK, []uint32{7, 9}},
		{[]*ratelimitv3.RateLimitDescriptor{checkout, client}, 3, rlsv3.RateLimitResponse_OK, []uint32{4, 6}},
		{[]*ratelimitv3.RateLimitDescriptor{checkout, client}, 3, rlsv3.RateLimitResponse_OK, []uint32{1, 3}},
		// checkout would reach 12 of 10: refused, and the address spends
		// nothing either.
		{[]*ratelimitv3.RateLimitDescriptor{checkout, client}, 3, rlsv3.RateLimitResponse_OVER_LIMIT, nil},
		// So the address still has 3 (it would have none had the refused
		// request spent), and then none.
		{[]*ratelimitv3.RateLimitDescriptor{client}, 3, rlsv3.RateLimitResponse_OK, []uint32{0}},
		{[]*ratelimitv3.RateLimitDescriptor{client}, 1, rlsv3.RateLimitResponse_OVER_LIMIT, nil},
	}
	for i, tt := range tests {
		on := i % len(clients)
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		resp, err := clients[on].ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: tt.descs, HitsAddend: tt.hits})
		cancel()
		if err != nil {
			t.Fatalf("request %d on %s: %v", i+1, agents[on].node.Name(), err)
		}
		if resp.GetOverallCode() != tt.want {
			t.Fatalf("request %d on %s: overall_code %v, want %v (%v)", i+1, agents[on].node.Name(), resp.GetOverallCode(), tt.want, resp.GetStatuses())
		}
		for j, want := range tt.remaining {
			if got := resp.GetStatuses()[j].GetLimitRemaining(); got != want {
				t.Errorf("request %d on %s, descriptor %d: limit_remaining %d, want %d", i+1, agents[on].node.Name(), j, got, want)
			}
		}
	}
}
