package cluster

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

func TestRuleToProto(t *testing.T) {
	tests := []struct {
		name string
		in   window.Rule
		want *sluicev1.Rule
	}{
		{"batched fixed", svcFixed, &sluicev1.Rule{Name: "fixed", Count: 3, Window: durationpb.New(10 * time.Second),
			WindowType: "fixed", SyncInterval: durationpb.New(200 * time.Millisecond), Allocation: "owner", FailMode: "local"}},
		{"batched adaptive sliding", window.Rule{Name: "api", Count: 1000, Window: time.Minute, Type: window.Sliding,
			SyncInterval: time.Second, Allocation: window.Adaptive},
			&sluicev1.Rule{Name: "api", Count: 1000, Window: durationpb.New(time.Minute), WindowType: "sliding",
				SyncInterval: durationpb.New(time.Second), Allocation: "adaptive", FailMode: "local"}},
		// A strict rule has no sync interval on the wire, only strict set.
		{"strict", window.Rule{Name: "pay", Count: 5, Window: time.Second, Type: window.Fixed,
			SyncInterval: window.Strict, FailMode: window.FailClosed},
			&sluicev1.Rule{Name: "pay", Count: 5, Window: durationpb.New(time.Second), WindowType: "fixed",
				Strict: true, Allocation: "owner", FailMode: "closed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ruleToProto(tt.in); !proto.Equal(got, tt.want) {
				t.Errorf("ruleToProto = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLimiterServiceRules asks a node for its rules before and after a
// reload: the answer carries the rules in order, defaults filled in, and the
// hash the node gossips, which Members reports.
func TestLimiterServiceRules(t *testing.T) {
	noSync := window.Rule{Name: "short", Count: 2, Window: 500 * time.Millisecond, Type: window.Fixed,
		Allocation: window.Classic}
	client, _, node := startLimiterNode(t, svcSliding, svcFixed, noSync)
	ctx := context.Background()
	sec := func(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
	fixed := &sluicev1.Rule{Name: "fixed", Count: 3, Window: sec(10 * time.Second), WindowType: "fixed",
		SyncInterval: sec(200 * time.Millisecond), Allocation: "owner", FailMode: "local"}
	steps := []struct {
		name     string
		reload   []window.Rule // nil: as started
		wantHash uint64
		want     []*sluicev1.Rule
	}{
		{"as started", nil, rulesHash([]window.Rule{svcSliding, svcFixed, noSync.WithDefaults()}), []*sluicev1.Rule{
			{Name: "sliding", Count: 3, Window: sec(10 * time.Second), WindowType: "sliding",
				SyncInterval: sec(200 * time.Millisecond), Allocation: "owner", FailMode: "local"},
			fixed,
			// The default sync interval is filled in: a fifth of the window.
			{Name: "short", Count: 2, Window: sec(500 * time.Millisecond), WindowType: "fixed",
				SyncInterval: sec(100 * time.Millisecond), Allocation: "classic", FailMode: "local"},
		}},
		{"after reload", []window.Rule{svcFixed}, rulesHash([]window.Rule{svcFixed}), []*sluicev1.Rule{fixed}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.reload != nil {
				if err := node.Reload(ctx, st.reload); err != nil {
					t.Fatalf("Reload: %v", err)
				}
			}
			resp, err := client.Rules(ctx, &sluicev1.RulesRequest{})
			if err != nil {
				t.Fatalf("Rules: %v", err)
			}
			if resp.GetNode() != "svc-test" {
				t.Errorf("node %q, want svc-test", resp.GetNode())
			}
			if got := resp.GetRulesHash(); got != st.wantHash || got != node.rulesHash() {
				t.Errorf("rules_hash %016x, want %016x (gossiped: %016x)", got, st.wantHash, node.rulesHash())
			}
			members, err := (&peerService{node: node}).Members(ctx, &sluicev1.MembersRequest{})
			if err != nil {
				t.Fatalf("Members: %v", err)
			}
			if got := members.GetMembers()[0].GetRulesHash(); got != resp.GetRulesHash() {
				t.Errorf("Members says rules_hash %016x, Rules %016x", got, resp.GetRulesHash())
			}
			if len(resp.GetRules()) != len(st.want) {
				t.Fatalf("%d rules, want %d: %v", len(resp.GetRules()), len(st.want), resp.GetRules())
			}
			for i, want := range st.want {
				if got := resp.GetRules()[i]; !proto.Equal(got, want) {
					t.Errorf("rules[%d] = %v, want %v", i, got, want)
				}
			}
		})
	}
}
