package main

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

func TestMembersErrors(t *testing.T) {
	// A port nothing listens on: bind one and let it go.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	tests := []struct {
		name       string
		args       []string
		wantStderr string // a prefix
	}{
		{"unknown flag", []string{"--nope"},
			"sluice members: unknown flag --nope\nrun 'sluice members --help' for usage\n"},
		{"stray argument", []string{"node-a"},
			"sluice members: unexpected argument \"node-a\"\nrun 'sluice members --help' for usage\n"},
		{"empty addr", []string{"--addr", ""},
			"sluice members: --addr must not be empty\nrun 'sluice members --help' for usage\n"},
		{"zero timeout", []string{"--timeout", "0s"},
			"sluice members: --timeout must be positive, got 0s\nrun 'sluice members --help' for usage\n"},
		{"negative timeout", []string{"--timeout", "-1s"},
			"sluice members: --timeout must be positive, got -1s\n"},
		{"bad timeout", []string{"--timeout", "soon"}, "sluice members: invalid value \"soon\" for --timeout"},
		{"bad json flag", []string{"--json=maybe"}, "sluice members: invalid value \"maybe\" for --json: want true or false\n"},
		{"unreachable", []string{"--addr", closed}, "sluice members: cannot reach " + closed + ": connection refused — is the agent running?\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), append([]string{"members"}, tt.args...)...)
			if code != 2 || !strings.HasPrefix(stderr, tt.wantStderr) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2, stderr starting %q", code, stdout, stderr, tt.wantStderr)
			}
		})
	}
}

func TestMembersHelp(t *testing.T) {
	code, stdout, stderr := runCmd(context.Background(), "members", "-h")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	for _, want := range []string{"usage: sluice members", "-addr HOST:PORT", "127.0.0.1:7070", "-json", "-timeout",
		"Exit status: 0 success, 2 error"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("usage lacks %q:\n%s", want, stdout)
		}
	}
}

var hex16 = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestMembersSingleNode(t *testing.T) {
	addr := startTestAgent(t, agentTestConfig, agentTestEpoch)
	ctx := context.Background()

	t.Run("json", func(t *testing.T) {
		code, stdout, stderr := runCmd(ctx, "members", "--addr", addr, "--json")
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		// The shape, key by key, as a script reading it sees it.
		var raw map[string]any
		if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, stdout)
		}
		if got := slices.Sorted(maps.Keys(raw)); !slices.Equal(got, []string{"addr", "members"}) {
			t.Errorf("top-level keys %q, want addr and members", got)
		}
		if raw["addr"] != addr {
			t.Errorf("addr %v, want %q", raw["addr"], addr)
		}
		list, ok := raw["members"].([]any)
		if !ok || len(list) != 1 {
			t.Fatalf("members %v, want a list of one", raw["members"])
		}
		m, ok := list[0].(map[string]any)
		if !ok {
			t.Fatalf("member %v, want an object", list[0])
		}
		wantKeys := []string{"boot", "gossip_addr", "grpc_addr", "name", "rules_hash", "rules_match", "self", "state"}
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, wantKeys) {
			t.Errorf("member keys %q, want %q", got, wantKeys)
		}
		want := map[string]any{"name": "test-node", "state": "alive", "grpc_addr": addr, "gossip_addr": "",
			"rules_match": true, "self": true}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s = %#v, want %#v", k, m[k], v)
			}
		}
		for _, k := range []string{"boot", "rules_hash"} {
			if s, _ := m[k].(string); !hex16.MatchString(s) {
				t.Errorf("%s = %#v, want 16 hex digits", k, m[k])
			}
		}
	})

	t.Run("table", func(t *testing.T) {
		code, stdout, stderr := runCmd(ctx, "members", "--addr", addr)
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("%d lines, want a header and one member:\n%s", len(lines), stdout)
		}
		if got, want := strings.Fields(lines[0]), []string{"NAME", "STATE", "GRPC", "GOSSIP", "BOOT", "RULES"}; !slices.Equal(got, want) {
			t.Errorf("header %q, want %q", got, want)
		}
		got := strings.Fields(lines[1])
		if len(got) != 7 || got[0] != "*" || got[1] != "test-node" || got[2] != "alive" || got[3] != addr ||
			got[4] != "-" || !hex16.MatchString(got[5]) || got[6] != "match" {
			t.Errorf("member line %q, want [* test-node alive %s - BOOT match]", got, addr)
		}
	})
}

func TestWriteMembersTable(t *testing.T) {
	tests := []struct {
		name string
		in   []*sluicev1.Member
		want string
	}{
		{"none", nil, "   NAME  STATE  GRPC  GOSSIP  BOOT  RULES\n"},
		{"sorted, self marked, drift and missing metadata shown", []*sluicev1.Member{
			{Name: "node-b", State: "alive", GrpcAddr: "127.0.0.1:7070", GossipAddr: "127.0.0.1:7946",
				Boot: 0xb, RulesHash: 1, RulesMatch: true, Self: true},
			{Name: "node-a", State: "suspect", GrpcAddr: "127.0.0.1:7071", GossipAddr: "127.0.0.1:7947",
				Boot: 0x3f1c0a9e5b7d2c41, RulesHash: 2},
			{Name: "node c\t", State: "alive", GossipAddr: "10.0.0.9:7946"},
		}, "" +
			"   NAME        STATE    GRPC            GOSSIP          BOOT              RULES\n" +
			"   \"node c\\t\"  alive    -               10.0.0.9:7946   0000000000000000  DIFFERENT\n" +
			"   node-a      suspect  127.0.0.1:7071  127.0.0.1:7947  3f1c0a9e5b7d2c41  DIFFERENT\n" +
			"*  node-b      alive    127.0.0.1:7070  127.0.0.1:7946  000000000000000b  match\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeMembersTable(&b, membersFromProto(tt.in)); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("table\n got:\n%s\nwant:\n%s", b.String(), tt.want)
			}
		})
	}
}
