package configfile

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// goodRules is a valid rules list the tests append to.
const goodRules = `rules:
  - name: api
    count: 10
    time_window: 10
    sync_interval: 0.2
`

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want Config
		// wantRules are the converted rules.
		wantRules []window.Rule
	}{
		{
			name: "defaults",
			yaml: goodRules,
			wantRules: []window.Rule{{Name: "api", Count: 10, Window: 10 * time.Second,
				Type: window.Sliding, SyncInterval: 200 * time.Millisecond}},
		},
		{
			name: "every field",
			yaml: `name: node-1
grpc_addr: 127.0.0.1:7070
gossip_addr: 0.0.0.0:7946
advertise_addr: 10.0.0.1:7946
http_addr: ":7071"
join: [10.0.0.2:7946, "[::1]:7946"]
data_dir: /var/lib/sluice
strict_timeout: 2
strict_bootstrap_wait: 0.5
borrow_timeout: 0.1
rules:
  - name: fixed.1
    count: 1099511627776
    time_window: 0.001
    window_type: fixed
    sync_interval: -1
    fail_mode: open
  - name: "sliding:2"
    count: 5
    time_window: 1.5
    window_type: sliding
    sync_interval: 0.0100000001
    allocation: classic
    fail_mode: closed
`,
			want: Config{Name: "node-1", GRPCAddr: "127.0.0.1:7070", GossipAddr: "0.0.0.0:7946",
				AdvertiseAddr: "10.0.0.1:7946", HTTPAddr: ":7071",
				Join: []string{"10.0.0.2:7946", "[::1]:7946"}, DataDir: "/var/lib/sluice",
				StrictTimeout: 2, StrictBootstrapWait: 0.5, BorrowTimeout: 0.1},
			wantRules: []window.Rule{
				{Name: "fixed.1", Count: 1 << 40, Window: time.Millisecond, Type: window.Fixed,
					SyncInterval: window.Strict, FailMode: window.FailOpen},
				{Name: "sliding:2", Count: 5, Window: 1500 * time.Millisecond, Type: window.Sliding,
					SyncInterval: 10 * time.Millisecond, Allocation: window.Classic, FailMode: window.FailClosed},
			},
		},
		{
			name: "tls",
			yaml: `tls:
  cert_file: /etc/sluice/node.pem
  key_file: /etc/sluice/node.key
  peer_ca_file: /etc/sluice/peer-ca.pem
  client_ca_file: /etc/sluice/client-ca.pem
  require_client_cert: true
` + goodRules,
			want: Config{TLS: &TLS{CertFile: "/etc/sluice/node.pem", KeyFile: "/etc/sluice/node.key",
				PeerCAFile: "/etc/sluice/peer-ca.pem", ClientCAFile: "/etc/sluice/client-ca.pem", RequireClientCert: true}},
			wantRules: []window.Rule{{Name: "api", Count: 10, Window: 10 * time.Second, SyncInterval: 200 * time.Millisecond}},
		},
		{
			name:      "insecure",
			yaml:      "insecure: true\ntls: ~\n" + goodRules,
			want:      Config{Insecure: true},
			wantRules: []window.Rule{{Name: "api", Count: 10, Window: 10 * time.Second, SyncInterval: 200 * time.Millisecond}},
		},
		{
			name: "secret keys",
			yaml: `secret_keys:
  - MDEyMzQ1Njc4OWFiY2RlZg==                       # 16 bytes, AES-128; the first encrypts
  - "MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u"             # 24 bytes
  - MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=   # 32 bytes
gossip_plaintext: accept
` + goodRules,
			want: Config{SecretKeys: [][]byte{[]byte("0123456789abcdef"), []byte("0123456789abcdefghijklmn"),
				[]byte("0123456789abcdef0123456789abcdef")}, GossipPlaintext: "accept"},
			wantRules: []window.Rule{{Name: "api", Count: 10, Window: 10 * time.Second, SyncInterval: 200 * time.Millisecond}},
		},
		{
			name:      "secret keys file",
			yaml:      "secret_keys_file: /etc/sluice/gossip.keys\ngossip_plaintext: send\nsecret_keys: ~\n" + goodRules,
			want:      Config{SecretKeysFile: "/etc/sluice/gossip.keys", GossipPlaintext: "send"},
			wantRules: []window.Rule{{Name: "api", Count: 10, Window: 10 * time.Second, SyncInterval: 200 * time.Millisecond}},
		},
		{
			name:      "whole count as float",
			yaml:      "rules: [{name: a, count: 1e3, time_window: 2, sync_interval: 1_0e-1}]",
			wantRules: []window.Rule{{Name: "a", Count: 1000, Window: 2 * time.Second, SyncInterval: time.Second}},
		},
		{
			name: "several limits and shadow mode",
			yaml: `rules:
  - name: api
    count: 20
    time_window: 1
    window_type: fixed
    limits:
      - {count: 1000, time_window: 60, window_type: sliding}
      - {count: 20000, time_window: 3600, window_type: fixed}
    shadow: true
`,
			wantRules: []window.Rule{{Name: "api", Count: 20, Window: time.Second, Type: window.Fixed,
				SyncInterval: 200 * time.Millisecond, Shadow: true, Also: []window.Limit{
					{Count: 1000, Window: time.Minute, Type: window.Sliding},
					{Count: 20000, Window: time.Hour, Type: window.Fixed}}}},
		},
		{
			name: "anchors and merge keys",
			yaml: `rules:
  - &base {name: a, count: 3, time_window: 1, sync_interval: 0.5}
  - <<: *base
    name: b
`,
			wantRules: []window.Rule{
				{Name: "a", Count: 3, Window: time.Second, SyncInterval: 500 * time.Millisecond},
				{Name: "b", Count: 3, Window: time.Second, SyncInterval: 500 * time.Millisecond},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("test.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if cfg.Path != "test.yaml" || cfg.Name != tt.want.Name || cfg.GRPCAddr != tt.want.GRPCAddr ||
				cfg.GossipAddr != tt.want.GossipAddr || cfg.AdvertiseAddr != tt.want.AdvertiseAddr ||
				cfg.HTTPAddr != tt.want.HTTPAddr || cfg.DataDir != tt.want.DataDir ||
				strings.Join(cfg.Join, ",") != strings.Join(tt.want.Join, ",") ||
				cfg.Insecure != tt.want.Insecure || !reflect.DeepEqual(cfg.TLS, tt.want.TLS) ||
				!reflect.DeepEqual(cfg.SecretKeys, tt.want.SecretKeys) || cfg.SecretKeysFile != tt.want.SecretKeysFile ||
				cfg.GossipPlaintext != tt.want.GossipPlaintext {
				t.Errorf("got %+v, want %+v", *cfg, tt.want)
			}
			rules, err := cfg.NodeRules()
			if err != nil {
				t.Fatalf("NodeRules: %v", err)
			}
			if len(rules) != len(tt.wantRules) {
				t.Fatalf("got %d rules, want %d", len(rules), len(tt.wantRules))
			}
			for i := range rules {
				if !rules[i].Equal(tt.wantRules[i]) {
					t.Errorf("rule %d = %+v, want %+v", i, rules[i], tt.wantRules[i])
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	// rule builds a rules list holding one rule with the given lines (the
	// rule starts on line 2).
	rule := func(lines ...string) string {
		return "rules:\n  - " + strings.Join(lines, "\n    ") + "\n"
	}
	tests := []struct {
		name      string
		yaml      string
		want      string // the whole error text
		wantField string
	}{
		{"empty file", "", `bad.yaml: rules: the file is empty; at least one rule is required`, "rules"},
		{"no rules", "name: x\n", `bad.yaml: rules: at least one rule is required`, "rules"},
		{"rules not a list", "rules: 5\n", "bad.yaml:1: rules must be a list of rules, got !!int `5`", "rules"},
		{"not a mapping", "- a\n", "bad.yaml:1: the config must be a mapping of fields (name, grpc_addr, gossip_addr, advertise_addr, http_addr, join, data_dir, raft_addr, raft_advertise_addr, strict_voters, strict_timeout, strict_bootstrap_wait, borrow_timeout, persist_interval, reconnect_interval, max_keys, tls, insecure, secret_keys, secret_keys_file, gossip_plaintext, rules), got !!seq", ""},
		{"strict_bootstrap_wait too long", "strict_bootstrap_wait: 7200\n" + goodRules,
			"bad.yaml:1: strict_bootstrap_wait must be seconds in (0, 3600], got 7200", "strict_bootstrap_wait"},
		{"borrow_timeout negative", "borrow_timeout: -0.1\n" + goodRules,
			"bad.yaml:1: borrow_timeout must be seconds in (0, 3600], got -0.1", "borrow_timeout"},
		{"persist_interval negative", "persist_interval: -1\n" + goodRules,
			"bad.yaml:1: persist_interval must be seconds in (0, 3600], got -1", "persist_interval"},
		{"reconnect_interval not a number", "reconnect_interval: soon\n" + goodRules,
			"bad.yaml:1: reconnect_interval must be a number of seconds, got !!str `soon`", "reconnect_interval"},
		// A syntax error is the parser's own, which says where it stopped.
		{"syntax", "rules: [\n", "bad.yaml: yaml: line 1: did not find expected node content", ""},
		{"two documents", goodRules + "---\nname: x\n", "bad.yaml:6: more than one YAML document; a config file holds one", ""},
		{"unknown top field", "nmae: x\n" + goodRules,
			`bad.yaml:1: unknown field "nmae" (known fields: name, grpc_addr, gossip_addr, advertise_addr, http_addr, join, data_dir, raft_addr, raft_advertise_addr, strict_voters, strict_timeout, strict_bootstrap_wait, borrow_timeout, persist_interval, reconnect_interval, max_keys, tls, insecure, secret_keys, secret_keys_file, gossip_plaintext, rules)`, "nmae"},
		{"unknown rule field", rule("name: api", "count: 10", "time_window: 10", "sync_interval: 0.2", "windw: 3"),
			`bad.yaml:6: rule 1 "api": unknown field "windw" (known fields: name, count, time_window, window_type, sync_interval, allocation, fail_mode, limits, shadow)`, "windw"},
		{"duplicate key", rule("name: api", "count: 10", "count: 11", "time_window: 10", "sync_interval: 0.2"),
			`bad.yaml:4: rule 1 "api": mapping key "count" already defined at line 3`, "count"},
		{"count not a number", rule("name: api", "count: ten", "time_window: 10", "sync_interval: 0.2"),
			"bad.yaml:3: rule 1 \"api\": count must be an integer, got !!str `ten`", "count"},
		{"count fractional", rule("name: api", "count: 1.5", "time_window: 10", "sync_interval: 0.2"),
			"bad.yaml:3: rule 1 \"api\": count must be an integer, got !!float `1.5`", "count"},
		{"time_window not a number", rule("name: api", "count: 1", "time_window: 10s", "sync_interval: 0.2"),
			"bad.yaml:4: rule 1 \"api\": time_window must be a number of seconds, got !!str `10s`", "time_window"},
		{"limit without a count", rule("name: api", "count: 10", "time_window: 10", "limits: [{time_window: 60}]"),
			`bad.yaml:5: rule 1 "api": limits[1]: count is required: hits allowed per window, 1 … 2^40`, "limits"},
		{"limit repeats the rule's window", rule("name: api", "count: 10", "time_window: 10", "limits: [{count: 5, time_window: 10}]"),
			`bad.yaml:5: rule 1 "api": limits[1] repeats the rule's first window (10s sliding)`, "limits"},
		{"limit with a rule field", rule("name: api", "count: 10", "time_window: 10", "limits: [{count: 5, time_window: 60, sync_interval: 1}]"),
			`bad.yaml:5: rule 1 "api": unknown field "sync_interval" (known fields: count, time_window, window_type); sync_interval is a field of the rule, shared by all its limits: write it beside the rule's count`, "sync_interval"},
		{"shadow not a bool", rule("name: api", "count: 10", "time_window: 10", "shadow: maybe"),
			"bad.yaml:5: rule 1 \"api\": shadow must be true or false, got !!str `maybe`", "shadow"},
		{"rule not a mapping", "rules:\n  - 5\n",
			"bad.yaml:2: rule 1: a rule must be a mapping of fields (name, count, time_window, window_type, sync_interval, allocation, fail_mode, limits, shadow), got !!int `5`", ""},
		{"name empty", rule("count: 1", "time_window: 10", "sync_interval: 0.2"),
			"bad.yaml:2: rule 1: name must not be empty", "name"},
		{"name bad char", rule("name: a b", "count: 1", "time_window: 10", "sync_interval: 0.2"),
			`bad.yaml:2: rule 1 "a b": name "a b" has ' ' at byte 1; allowed are letters, digits and _.:-`, "name"},
		{"count missing", rule("name: api", "time_window: 10", "sync_interval: 0.2"),
			`bad.yaml:2: rule 1 "api": count is required: hits allowed per window, 1 … 2^40`, "count"},
		{"count zero", rule("name: api", "count: 0", "time_window: 10", "sync_interval: 0.2"),
			`bad.yaml:3: rule 1 "api": count must be ≥ 1, got 0`, "count"},
		{"count fraction via merge", "rules:\n  - &a {name: a, count: 1, time_window: 1, sync_interval: -1}\n  - <<: [{count: 0.5}, *a]\n    name: b\n",
			"bad.yaml:3: rule 2 \"b\": count must be an integer, got !!float `0.5`", "count"},
		{"rule in flow list not a mapping", "rules: [5]\n",
			"bad.yaml:1: rule 1: a rule must be a mapping of fields (name, count, time_window, window_type, sync_interval, allocation, fail_mode, limits, shadow), got !!int `5`", ""},
		{"count too big", rule("name: api", "count: 1099511627777", "time_window: 10", "sync_interval: 0.2"),
			`bad.yaml:3: rule 1 "api": count must be ≤ 2^40 (1099511627776), got 1099511627777`, "count"},
		{"time_window missing", rule("name: api", "count: 1", "sync_interval: 0.2"),
			`bad.yaml:2: rule 1 "api": time_window is required: the window length in seconds, e.g. 10`, "time_window"},
		{"time_window zero", rule("name: api", "count: 1", "time_window: 0", "sync_interval: -1"),
			`bad.yaml:4: rule 1 "api": time_window must be ≥ 1ms, got 0s`, "time_window"},
		{"time_window below 1ms", rule("name: api", "count: 1", "time_window: 0.0009", "sync_interval: -1"),
			`bad.yaml:4: rule 1 "api": time_window must be ≥ 1ms, got 900µs`, "time_window"},
		{"time_window negative", rule("name: api", "count: 1", "time_window: -1", "sync_interval: -1"),
			`bad.yaml:4: rule 1 "api": time_window must not be negative, got -1`, "time_window"},
		{"time_window NaN", rule("name: api", "count: 1", "time_window: .nan", "sync_interval: -1"),
			`bad.yaml:4: rule 1 "api": time_window must be a finite number of seconds, got NaN`, "time_window"},
		{"time_window Inf", rule("name: api", "count: 1", "time_window: .inf", "sync_interval: -1"),
			`bad.yaml:4: rule 1 "api": time_window must be a finite number of seconds, got +Inf`, "time_window"},
		{"time_window overflows", rule("name: api", "count: 1", "time_window: 1e10", "sync_interval: -1"),
			`bad.yaml:4: rule 1 "api": time_window must be at most 9.223372036854776e+09 seconds, got 1e+10`, "time_window"},
		{"window_type", rule("name: api", "count: 1", "time_window: 1", "window_type: rolling", "sync_interval: -1"),
			`bad.yaml:5: rule 1 "api": window_type must be fixed or sliding, got "rolling"`, "window_type"},
		{"sync_interval zero", rule("name: api", "count: 1", "time_window: 1", "sync_interval: 0"),
			`bad.yaml:5: rule 1 "api": sync_interval must be -1 (strict) or ≥ 0.01 seconds and < time_window, got 0; leave it out for the default (0.2, or a fifth of time_window if that is shorter)`, "sync_interval"},
		{"sync_interval below 10ms", rule("name: api", "count: 1", "time_window: 1", "sync_interval: 0.009"),
			`bad.yaml:5: rule 1 "api": sync_interval must be -1 (strict) or ≥ 10ms and < time_window (1s), got 9ms`, "sync_interval"},
		{"sync_interval not below time_window", rule("name: api", "count: 1", "time_window: 1", "sync_interval: 1"),
			`bad.yaml:5: rule 1 "api": sync_interval must be -1 (strict) or ≥ 10ms and < time_window (1s), got 1s`, "sync_interval"},
		{"sync_interval negative", rule("name: api", "count: 1", "time_window: 1", "sync_interval: -0.5"),
			`bad.yaml:5: rule 1 "api": sync_interval must be -1 (strict) or a positive number of seconds, got -0.5`, "sync_interval"},
		{"sync_interval NaN", rule("name: api", "count: 1", "time_window: 1", "sync_interval: .NaN"),
			`bad.yaml:5: rule 1 "api": sync_interval must be a finite number of seconds, got NaN`, "sync_interval"},
		{"sync_interval -Inf", rule("name: api", "count: 1", "time_window: 1", "sync_interval: -.inf"),
			`bad.yaml:5: rule 1 "api": sync_interval must be -1 (strict) or a positive number of seconds, got -Inf`, "sync_interval"},
		{"allocation", rule("name: api", "count: 1", "time_window: 1", "sync_interval: 0.5", "allocation: greedy"),
			`bad.yaml:6: rule 1 "api": allocation must be owner, adaptive or classic, got "greedy"`, "allocation"},
		{"fail_mode", rule("name: api", "count: 1", "time_window: 1", "sync_interval: -1", "fail_mode: sideways"),
			`bad.yaml:6: rule 1 "api": fail_mode must be open, closed or local, got "sideways"`, "fail_mode"},
		{"duplicate names", goodRules + "  - {name: other, count: 1, time_window: 1, sync_interval: -1}\n  - {name: api, count: 1, time_window: 1, sync_interval: -1}\n",
			`bad.yaml:7: rule 3 "api": name "api" is already used by rule 1`, "name"},
		{"grpc_addr", "grpc_addr: localhost\n" + goodRules,
			`bad.yaml:1: grpc_addr must be HOST:PORT, got "localhost": address localhost: missing port in address`, "grpc_addr"},
		{"http_addr port", "http_addr: localhost:http\n" + goodRules,
			`bad.yaml:1: http_addr must have a port number 0–65535, got "localhost:http"`, "http_addr"},
		{"join entry", "join:\n  - a:1\n  - b:99999\n" + goodRules,
			`bad.yaml:3: join[1] must have a port number 0–65535, got "b:99999"`, "join"},
		{"join not a list", "join: a:1\n" + goodRules,
			"bad.yaml:1: join must be a list of HOST:PORT strings, got !!str `a:1`", "join"},
		{"tls without a key", "tls:\n  cert_file: n.pem\n  peer_ca_file: ca.pem\n" + goodRules,
			"bad.yaml:1: tls.key_file is required: the private key of tls.cert_file (PEM)", "tls.key_file"},
		{"tls empty", "tls: {}\n" + goodRules,
			"bad.yaml:1: tls.cert_file is required: the node's certificate (PEM), served to clients and peers and presented to peers\n" +
				"bad.yaml:1: tls.key_file is required: the private key of tls.cert_file (PEM)\n" +
				"bad.yaml:1: tls.peer_ca_file is required: the CA certificates (PEM) whose certificates make peers", "tls.cert_file"},
		{"tls not a mapping", "tls: true\n" + goodRules,
			"bad.yaml:1: tls must be a mapping of cert_file, key_file, peer_ca_file, client_ca_file, require_client_cert, got !!bool `true`", "tls"},
		{"tls path empty", "tls: {cert_file: n.pem, key_file: '', peer_ca_file: ca.pem}\n" + goodRules,
			"bad.yaml:1: tls.key_file must not be empty: name a PEM file, or leave the field out", "tls.key_file"},
		{"tls path left out by null", "tls: {cert_file: n.pem, key_file: ~, peer_ca_file: ca.pem}\n" + goodRules,
			"bad.yaml:1: tls.key_file is required: the private key of tls.cert_file (PEM)", "tls.key_file"},
		{"tls unknown field", "tls:\n  cert_file: n.pem\n  key_file: n.key\n  peer_ca_file: ca.pem\n  ca_file: x\n" + goodRules,
			`bad.yaml:5: unknown field "ca_file" in tls (known fields: cert_file, key_file, peer_ca_file, client_ca_file, require_client_cert)`, "tls.ca_file"},
		{"tls field at the top", "cert_file: n.pem\n" + goodRules,
			`bad.yaml:1: unknown field "cert_file" (known fields: name, grpc_addr, gossip_addr, advertise_addr, http_addr, join, data_dir, raft_addr, raft_advertise_addr, strict_voters, strict_timeout, strict_bootstrap_wait, borrow_timeout, persist_interval, reconnect_interval, max_keys, tls, insecure, secret_keys, secret_keys_file, gossip_plaintext, rules); cert_file is a field of tls: write it in the tls mapping`, "cert_file"},
		{"node setting in tls", "tls:\n  cert_file: n.pem\n  key_file: n.key\n  peer_ca_file: ca.pem\n  insecure: true\n" + goodRules,
			`bad.yaml:5: unknown field "insecure" in tls (known fields: cert_file, key_file, peer_ca_file, client_ca_file, require_client_cert); insecure is a node setting: write it at the top level, outside tls`, "tls.insecure"},
		{"require_client_cert not a bool", "tls: {cert_file: n.pem, key_file: n.key, peer_ca_file: ca.pem, require_client_cert: yes please}\n" + goodRules,
			"bad.yaml:1: tls.require_client_cert must be true or false, got !!str `yes please`", "tls.require_client_cert"},
		{"tls and insecure", "insecure: true\ntls: {cert_file: n.pem, key_file: n.key, peer_ca_file: ca.pem}\n" + goodRules,
			"bad.yaml:1: insecure: true and tls are both set: insecure serves plaintext, for a node without tls", "insecure"},
		{"insecure not a bool", "insecure: 1\n" + goodRules,
			"bad.yaml:1: insecure must be true or false, got !!int `1`", "insecure"},
		{"secret key not base64", "secret_keys:\n  - MDEyMzQ1Njc4OWFiY2RlZg==\n  - not*base64\n" + goodRules,
			"bad.yaml:3: secret_keys[1] is not base64 (standard encoding, as base64(1) writes it): illegal base64 data at input byte 3", "secret_keys"},
		{"secret key in URL encoding", "secret_keys: [MDEyMzQ1Njc4OWFiY2RlZg__]\n" + goodRules,
			"bad.yaml:1: secret_keys[0] is not base64 (standard encoding, as base64(1) writes it): illegal base64 data at input byte 22", "secret_keys"},
		{"secret key too short", "secret_keys:\n  - MDEyMzQ1Njc4OWFiY2RlZg==\n  - MDEyMzQ1Njc4OWFiY2RlZmdoaWo=\n" + goodRules,
			"bad.yaml:3: secret_keys[1]: 20 bytes, want 16, 24 or 32", "secret_keys"},
		{"secret key twice", "secret_keys: [MDEyMzQ1Njc4OWFiY2RlZg==, QUJDREVGR0hJSktMTU5PUA==, MDEyMzQ1Njc4OWFiY2RlZg==]\n" + goodRules,
			"bad.yaml:1: secret_keys[2]: the same key as secret_keys[0]", "secret_keys"},
		{"secret key twice after a bad one", "secret_keys: [QUJD, MDEyMzQ1Njc4OWFiY2RlZg==, MDEyMzQ1Njc4OWFiY2RlZg==]\n" + goodRules,
			"bad.yaml:1: secret_keys[0]: 3 bytes, want 16, 24 or 32\nbad.yaml:1: secret_keys[2]: the same key as secret_keys[1]", "secret_keys"},
		{"too many secret keys", "secret_keys: [a, b, c, d, e, f, g, h, i]\n" + goodRules,
			"bad.yaml:1: secret_keys: 9 keys, want at most 8 (a rotation needs 2)", "secret_keys"},
		{"secret keys empty", "secret_keys: []\n" + goodRules,
			"bad.yaml:1: secret_keys is empty: list at least one key, or leave the field out", "secret_keys"},
		// The value may be a key: errors name its type, never its text.
		{"one secret key, not a list", "secret_keys: MDEyMzQ1Njc4OWFiY2RlZg==\n" + goodRules,
			"bad.yaml:1: secret_keys must be a list of base64 keys, got !!str; write one key as [KEY]", "secret_keys"},
		{"secret key not a string", "secret_keys:\n  - {key: MDEyMzQ1Njc4OWFiY2RlZg==}\n" + goodRules,
			"bad.yaml:2: secret_keys[0] must be a base64 string, got !!map", "secret_keys"},
		{"secret keys and a keys file", "secret_keys: [MDEyMzQ1Njc4OWFiY2RlZg==]\nsecret_keys_file: k\n" + goodRules,
			"bad.yaml:2: secret_keys and secret_keys_file are both set: set one", "secret_keys_file"},
		{"keys file empty", "secret_keys_file: ''\n" + goodRules,
			"bad.yaml:1: secret_keys_file must not be empty: name a file of base64 keys, or leave the field out", "secret_keys_file"},
		{"gossip_plaintext without keys", "gossip_plaintext: send\n" + goodRules,
			"bad.yaml:1: gossip_plaintext: send needs secret_keys or secret_keys_file: it says what a node with keys does with plaintext gossip", "gossip_plaintext"},
		{"gossip_plaintext unknown", "secret_keys: [MDEyMzQ1Njc4OWFiY2RlZg==]\ngossip_plaintext: allow\n" + goodRules,
			`bad.yaml:2: gossip_plaintext must be refuse, accept or send, got "allow"`, "gossip_plaintext"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("got %+v, want error %q", cfg, tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("error\n got: %s\nwant: %s", err, tt.want)
			}
			ce, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %T is not a *Error", err)
			}
			if ce.Field != tt.wantField {
				t.Errorf("Field = %q, want %q", ce.Field, tt.wantField)
			}
		})
	}
}

// TestParseReportsEveryRule checks that one pass names every bad
// rule, and that a field error from Validate can be matched.
func TestParseReportsEveryRule(t *testing.T) {
	data := `rules:
  - name: a
    count: 0
    time_window: 1
    sync_interval: -1
  - name: b
    count: 1
    time_window: 1
    sync_interval: 2
`
	_, err := Parse("x.yaml", []byte(data))
	want := `x.yaml:3: rule 1 "a": count must be ≥ 1, got 0` + "\n" +
		`x.yaml:9: rule 2 "b": sync_interval must be -1 (strict) or ≥ 10ms and < time_window (1s), got 2s`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got: %v\nwant: %s", err, want)
	}
	if !errors.Is(err, window.ErrInvalidRule) {
		t.Errorf("errors.Is(err, window.ErrInvalidRule) = false, want true")
	}
}

func TestNodeRulesWithoutFile(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"ok", Config{Rules: []Rule{{Name: "a", Count: n(1), TimeWindow: f(1), SyncInterval: f(-1)}}}, ""},
		{"no rules", Config{Path: "p.yaml"}, "p.yaml: rules: at least one rule is required"},
		{"bad rule", Config{Rules: []Rule{{Name: "a", Count: n(0), TimeWindow: f(1)}}},
			`rule 1 "a": count must be ≥ 1, got 0`},
		{"no sync interval", Config{Rules: []Rule{{Name: "a", Count: n(1), TimeWindow: f(1)}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.NodeRules()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Fatalf("error %q, want %q", got, tt.wantErr)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(good, []byte(goodRules), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr string // substring; empty for success
	}{
		{"good", good, ""},
		{"example", filepath.Join("..", "..", "examples", "sluice.yaml"), ""},
		{"missing", filepath.Join(dir, "nope.yaml"), "no such file"},
		{"too big", big, "big.yaml: file is larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Path != tt.path {
				t.Errorf("Path = %q, want %q", cfg.Path, tt.path)
			}
			if _, err := cfg.NodeRules(); err != nil {
				t.Errorf("NodeRules: %v", err)
			}
		})
	}
}

// TestNodeSecretKeys reads the keys of a secret_keys_file, and names the
// line of a key at fault in it, and the line of secret_keys_file in the
// config file.
func TestNodeSecretKeys(t *testing.T) {
	dir := t.TempDir()
	const (
		k16 = "MDEyMzQ1Njc4OWFiY2RlZg=="                     // 0123456789abcdef
		k32 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 0123456789abcdef twice
	)
	keysFile := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var many string
	for i := range 9 {
		many += base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{byte('a' + i)}, 16)) + "\n"
	}
	good := keysFile("good.keys", "# gossip keys: the first encrypts\n"+k32+"\r\n\n  "+k16+"  \n")
	tests := []struct {
		name string
		file string // the secret_keys_file
		want [][]byte
		err  string // the whole error; empty for none
	}{
		{"comments, blank lines and CRLF", good, [][]byte{[]byte("0123456789abcdef0123456789abcdef"), []byte("0123456789abcdef")}, ""},
		{"not base64", keysFile("bad.keys", k16+"\n\n%%%\n"), nil,
			"c.yaml:2: secret_keys_file " + dir + "/bad.keys:3 is not base64 (standard encoding, as base64(1) writes it): illegal base64 data at input byte 0"},
		{"wrong size", keysFile("short.keys", "MDEyMzQ1Njc4OWFiY2RlZmdoaWo=\n"), nil,
			"c.yaml:2: secret_keys_file " + dir + "/short.keys:1: 20 bytes, want 16, 24 or 32"},
		{"twice", keysFile("twice.keys", "# a\n"+k16+"\n"+k32+"\n"+k16+"\n"), nil,
			"c.yaml:2: secret_keys_file " + dir + "/twice.keys:4: the same key as line 2"},
		{"no keys", keysFile("empty.keys", "# nothing yet\n\n"), nil,
			"c.yaml:2: secret_keys_file " + dir + "/empty.keys holds no keys: write one base64 key per line"},
		{"too many", keysFile("many.keys", many), nil,
			"c.yaml:2: secret_keys_file " + dir + "/many.keys: more than 8 keys (a rotation needs 2)"},
		{"missing", filepath.Join(dir, "nope.keys"), nil,
			"c.yaml:2: secret_keys_file: stat " + dir + "/nope.keys: no such file or directory"},
		{"a directory", dir, nil, "c.yaml:2: secret_keys_file: " + dir + ": not a regular file (a directory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("c.yaml", []byte("name: n\nsecret_keys_file: "+tt.file+"\n"+goodRules))
			if err != nil {
				t.Fatal(err)
			}
			keys, err := cfg.NodeSecretKeys()
			nc, ncErr := cfg.NodeConfig()
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error\n got: %v\nwant: %s", err, tt.err)
				}
				if ncErr == nil || ncErr.Error() != tt.err {
					t.Errorf("NodeConfig error %v, want the same", ncErr)
				}
				if e, ok := errors.AsType[*Error](err); !ok || e.Field != "secret_keys_file" {
					t.Errorf("error %T names field %q, want secret_keys_file", err, e.Field)
				}
				return
			}
			if err != nil || ncErr != nil {
				t.Fatalf("errors %v, %v", err, ncErr)
			}
			if !reflect.DeepEqual(keys, tt.want) || !reflect.DeepEqual(nc.SecretKeys, tt.want) {
				t.Errorf("keys %q, node config's %q; want %q", keys, nc.SecretKeys, tt.want)
			}
		})
	}

	// A config built in code is checked as the file would be.
	n := func(v int64) *int64 { return &v }
	f := func(v float64) *float64 { return &v }
	rules := []Rule{{Name: "a", Count: n(1), TimeWindow: f(1)}}
	codeTests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"short key", Config{Path: "p.yaml", Rules: rules, SecretKeys: [][]byte{[]byte("0123456789abcdef"), []byte("short")}},
			"p.yaml: secret_keys[1]: 5 bytes, want 16, 24 or 32"},
		{"keys and a file", Config{Path: "p.yaml", Rules: rules, SecretKeys: [][]byte{[]byte("0123456789abcdef")}, SecretKeysFile: good},
			"p.yaml: secret_keys and secret_keys_file are both set: set one"},
		{"plaintext mode", Config{Path: "p.yaml", Rules: rules, SecretKeys: [][]byte{[]byte("0123456789abcdef")}, GossipPlaintext: "sometimes"},
			`p.yaml: gossip_plaintext must be refuse, accept or send, got "sometimes"`},
	}
	for _, tt := range codeTests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.cfg.NodeConfig(); err == nil || err.Error() != tt.err {
				t.Fatalf("error\n got: %v\nwant: %s", err, tt.err)
			}
		})
	}
}
