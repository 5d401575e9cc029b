package main

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// rulesTestConfig has a rule of each kind: batched with the default sync
// interval and allocation, batched adaptive, and strict; in an order that
// is not by name.
const rulesTestConfig = `name: rules-node
rules:
  - name: sliding
    count: 3
    time_window: 10
  - name: pay
    count: 5
    time_window: 60
    window_type: fixed
    sync_interval: -1
    fail_mode: closed
  - name: fixed
    count: 1000
    time_window: 3600
    window_type: fixed
    sync_interval: 0.5
    allocation: adaptive
`

func TestRulesLoneNode(t *testing.T) {
	addr := startTestAgent(t, rulesTestConfig, agentTestEpoch)
	ctx := context.Background()

	// The hash `sluice members` shows for the node is the one it gossips.
	code, stdout, stderr := runCmd(ctx, "members", "--addr", addr, "--json")
	if code != 0 {
		t.Fatalf("members: exit %d, stderr %q", code, stderr)
	}
	var members membersJSON
	if err := json.Unmarshal([]byte(stdout), &members); err != nil || len(members.Members) != 1 {
		t.Fatalf("members: %v, %q", err, stdout)
	}
	hash := members.Members[0].RulesHash
	if !hex16.MatchString(hash) {
		t.Fatalf("members rules_hash %q, want 16 hex digits", hash)
	}

	t.Run("table", func(t *testing.T) {
		code, stdout, stderr := runCmd(ctx, "rules", "--addr", addr)
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		want := "node rules-node at " + addr + ", rules hash " + hash + "\n\n" +
			"NAME     COUNT  TIME_WINDOW  WINDOW_TYPE  SYNC_INTERVAL  ALLOCATION  FAIL_MODE  SHADOW\n" +
			"fixed    1000   1h           fixed        500ms          adaptive    -          -\n" +
			"pay      5      1m           fixed        strict         -           closed     -\n" +
			"sliding  3      10s          sliding      200ms          owner       -          -\n"
		if stdout != want {
			t.Errorf("stdout\n got:\n%s\nwant:\n%s", stdout, want)
		}
	})

	t.Run("json", func(t *testing.T) {
		code, stdout, stderr := runCmd(ctx, "rules", "--addr", addr, "--json")
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		if strings.Count(stdout, "\n") != 1 {
			t.Errorf("stdout is %d lines, want one JSON object on one line:\n%s", strings.Count(stdout, "\n"), stdout)
		}
		// The shape, key by key, as a script reading it sees it.
		var raw map[string]any
		if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, stdout)
		}
		if got := slices.Sorted(maps.Keys(raw)); !slices.Equal(got, []string{"addr", "node", "rules", "rules_hash"}) {
			t.Errorf("top-level keys %q", got)
		}
		var got rulesJSON
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		want := rulesJSON{Addr: addr, Node: "rules-node", RulesHash: hash, Rules: []ruleJSON{
			{Name: "fixed", Count: 1000, TimeWindow: 3600, WindowType: "fixed", SyncInterval: 0.5,
				Allocation: "adaptive", FailMode: "local"},
			{Name: "pay", Count: 5, TimeWindow: 60, WindowType: "fixed", SyncInterval: -1, Strict: true,
				Allocation: "owner", FailMode: "closed"},
			{Name: "sliding", Count: 3, TimeWindow: 10, WindowType: "sliding", SyncInterval: 0.2,
				Allocation: "owner", FailMode: "local"},
		}}
		if got.Addr != want.Addr || got.Node != want.Node || got.RulesHash != want.RulesHash || !reflect.DeepEqual(got.Rules, want.Rules) {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
	})
}

func TestRulesHelp(t *testing.T) {
	code, stdout, stderr := runCmd(context.Background(), "rules", "--help")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	for _, want := range []string{"usage: sluice rules [--addr HOST:PORT] [--timeout DURATION] [--json]",
		"  --addr HOST:PORT", `(default "127.0.0.1:7070")`, "  --json", "  --timeout DURATION",
		"Exit status: 0 success, 2 error"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("usage lacks %q:\n%s", want, stdout)
		}
	}
}

func TestRulesUsageErrors(t *testing.T) {
	checkUsageErrors(t, []string{"rules"}, []usageCase{
		{"stray argument", []string{"api"}, "sluice rules: unexpected argument \"api\"\nrun 'sluice rules --help' for usage\n"},
		{"empty addr", []string{"--addr", ""}, "sluice rules: --addr must not be empty\n"},
		{"addr without port", []string{"--addr", "localhost"}, "sluice rules: --addr must be HOST:PORT, got \"localhost\""},
		{"zero timeout", []string{"--timeout", "0s"}, "sluice rules: --timeout must be positive, got 0s\n"},
		{"mistyped flag", []string{"--jsno"}, "sluice rules: unknown flag --jsno; did you mean --json?\n"},
	})
}

func TestWriteRulesTable(t *testing.T) {
	sec := durationpb.New
	tests := []struct {
		name string
		in   *sluicev1.RulesResponse
		want string
	}{
		{"no rules", &sluicev1.RulesResponse{Node: "n", RulesHash: 0xab},
			"node n at 127.0.0.1:7070, rules hash 00000000000000ab\n\n" +
				"NAME  COUNT  TIME_WINDOW  WINDOW_TYPE  SYNC_INTERVAL  ALLOCATION  FAIL_MODE  SHADOW\n"},
		{"sorted; odd names quoted, missing fields dashed", &sluicev1.RulesResponse{Node: "node a", RulesHash: 1, Rules: []*sluicev1.Rule{
			{Name: "b", Count: 7, Window: sec(90 * time.Second), WindowType: "fixed", SyncInterval: sec(250 * time.Millisecond), Allocation: "owner"},
			{Name: "a\tb", Count: 1, Window: sec(2 * time.Hour), Strict: true},
		}}, "" +
			"node \"node a\" at 127.0.0.1:7070, rules hash 0000000000000001\n\n" +
			"NAME    COUNT  TIME_WINDOW  WINDOW_TYPE  SYNC_INTERVAL  ALLOCATION  FAIL_MODE  SHADOW\n" +
			"\"a\\tb\"  1      2h           -            strict         -           -          -\n" +
			"b       7      1m30s        fixed        250ms          owner       -          -\n"},
		{"several limits and shadow mode", &sluicev1.RulesResponse{Node: "n", RulesHash: 2, Rules: []*sluicev1.Rule{
			{Name: "api", Count: 20, Window: sec(time.Second), WindowType: "fixed", SyncInterval: sec(100 * time.Millisecond),
				Allocation: "owner", Shadow: true, Limits: []*sluicev1.Limit{{Count: 1000, Window: sec(time.Minute), WindowType: "sliding"}}},
		}}, "" +
			"node n at 127.0.0.1:7070, rules hash 0000000000000002\n\n" +
			"NAME       COUNT  TIME_WINDOW  WINDOW_TYPE  SYNC_INTERVAL  ALLOCATION  FAIL_MODE  SHADOW\n" +
			"api        20     1s           fixed        100ms          owner       -          yes\n" +
			"  + limit  1000   1m           sliding\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeRulesTable(&b, rulesFromProto("127.0.0.1:7070", tt.in)); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("table\n got:\n%s\nwant:\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestShortDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"}, {10 * time.Millisecond, "10ms"}, {10 * time.Second, "10s"}, {time.Minute, "1m"},
		{90 * time.Second, "1m30s"}, {time.Hour, "1h"}, {time.Hour + time.Minute, "1h1m"},
		{time.Hour + time.Second, "1h0m1s"}, {24 * time.Hour, "24h"},
	}
	for _, tt := range tests {
		if got := shortDuration(tt.in); got != tt.want {
			t.Errorf("shortDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestFormatDecision checks the one line `sluice check` prints, a shadow
// refusal included.
func TestFormatDecision(t *testing.T) {
	sec := durationpb.New
	for _, tc := range []struct {
		in   *sluicev1.CheckResponse
		want string
	}{
		{&sluicev1.CheckResponse{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: sec(10 * time.Second), RetryAfter: sec(0), Path: "local"},
			"allowed  limit=10 remaining=9 reset_after=10s retry_after=0s path=local"},
		{&sluicev1.CheckResponse{Limit: 10, ResetAfter: sec(9200 * time.Millisecond), RetryAfter: sec(1300*time.Millisecond + 1), Path: "strict"},
			"REFUSED  limit=10 remaining=0 reset_after=9.2s retry_after=1.301s path=strict"},
		{&sluicev1.CheckResponse{Allowed: true, Shadowed: true, Limit: 5, ResetAfter: sec(time.Minute), RetryAfter: sec(44 * time.Second), Path: "local"},
			"allowed  limit=5 remaining=0 reset_after=1m0s retry_after=44s path=local shadow=refused"},
	} {
		if got := formatDecision(tc.in); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
