package configfile

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// TestParseStructureErrors covers what the YAML decoder no longer checks
// for the package: the shape of the document, keys, value types, and bytes
// that are not YAML. Each error names the line of the node at fault.
func TestParseStructureErrors(t *testing.T) {
	const topKnown = "name, grpc_addr, gossip_addr, advertise_addr, http_addr, join, data_dir, raft_addr, raft_advertise_addr, strict_voters, strict_timeout, strict_bootstrap_wait, borrow_timeout, persist_interval, reconnect_interval, max_keys, tls, insecure, secret_keys, secret_keys_file, gossip_plaintext, rules"
	const ruleKnown = "name, count, time_window, window_type, sync_interval, allocation, fail_mode, limits, shadow"
	tests := []struct {
		name      string
		yaml      string
		want      string // the whole error text
		wantField string // of the first error
	}{
		// A key at the wrong nesting level.
		{"rule field at the top", "count: 5\n" + goodRules,
			`bad.yaml:1: unknown field "count" (known fields: ` + topKnown + `); count is a field of a rule: write it in an entry of the rules list`, "count"},
		{"setting in a rule", "rules:\n  - name: api\n    count: 1\n    time_window: 1\n    http_addr: ':0'\n",
			`bad.yaml:5: rule 1 "api": unknown field "http_addr" (known fields: ` + ruleKnown + `); http_addr is a node setting: write it at the top level, outside rules`, "http_addr"},
		{"rule without its dash", "rules:\n  name: api\n  count: 1\n",
			`bad.yaml:2: rules must be a list of rules, got !!map; start each rule with "- "`, "rules"},
		{"rule nested one level too deep", "rules:\n  - rule:\n      name: api\n",
			`bad.yaml:2: rule 1: unknown field "rule" (known fields: ` + ruleKnown + `)`, "rule"},

		// A value of the wrong type.
		{"quoted number", "strict_timeout: \"1\"\n" + goodRules,
			"bad.yaml:1: strict_timeout must be a number of seconds, got !!str `1`", "strict_timeout"},
		{"quoted count", "rules:\n  - name: api\n    count: '5'\n    time_window: 1\n",
			"bad.yaml:3: rule 1 \"api\": count must be an integer, got !!str `5`", "count"},
		{"word for voters", "strict_voters: three\n" + goodRules,
			"bad.yaml:1: strict_voters must be an integer, got !!str `three`", "strict_voters"},
		{"fractional voters", "strict_voters: 3.5\n" + goodRules,
			"bad.yaml:1: strict_voters must be an integer, got !!float `3.5`", "strict_voters"},
		{"word for max_keys", "max_keys: lots\n" + goodRules,
			"bad.yaml:1: max_keys must be an integer, got !!str `lots`", "max_keys"},
		{"list for a string", "name: [a, b]\n" + goodRules,
			"bad.yaml:1: name must be a string, got !!seq", "name"},
		{"mapping for a number", "rules:\n  - name: api\n    count: 1\n    time_window:\n      seconds: 10\n",
			"bad.yaml:5: rule 1 \"api\": time_window must be a number of seconds, got !!map", "time_window"},
		{"list in join", "join:\n  - a:1\n  - [b:2]\n" + goodRules,
			"bad.yaml:3: join[1] must be a HOST:PORT string, got !!seq", "join"},
		{"count beyond int64", "rules:\n  - name: api\n    count: 9223372036854775808\n    time_window: 1\n",
			"bad.yaml:3: rule 1 \"api\": count is out of range, got !!int `9223372036854775808`", "count"},
		{"long value cut", "rules:\n  - name: api\n    count: " + strings.Repeat("9", 50) + "x\n    time_window: 1\n",
			"bad.yaml:3: rule 1 \"api\": count must be an integer, got !!str `" + strings.Repeat("9", 37) + "...`", "count"},

		// Duplicate keys.
		{"duplicate setting", "name: a\nname: b\n" + goodRules,
			`bad.yaml:2: mapping key "name" already defined at line 1`, "name"},
		{"duplicate rules", goodRules + goodRules,
			`bad.yaml:6: mapping key "rules" already defined at line 1`, "rules"},
		{"duplicate merge key", "rules:\n  - <<: {count: 1}\n    <<: {count: 2}\n    name: a\n    time_window: 1\n",
			`bad.yaml:3: rule 1 "a": mapping key "<<" already defined at line 2`, "<<"},

		// Empty documents and documents that are not a mapping.
		{"only a comment", "# nothing yet\n", "bad.yaml: rules: the file is empty; at least one rule is required", "rules"},
		{"empty document", "# nothing yet\n---\n",
			"bad.yaml:2: rules: the document is empty; at least one rule is required", "rules"},
		{"null document", "\n~\n", "bad.yaml:2: rules: the document is empty; at least one rule is required", "rules"},
		{"empty rules list", "name: a\nrules: []\n", "bad.yaml:2: rules: at least one rule is required", "rules"},
		{"scalar document", "\n\nrules\n",
			"bad.yaml:3: the config must be a mapping of fields (" + topKnown + "), got !!str `rules`", ""},
		{"list document", "# rules:\n- name: api\n",
			"bad.yaml:2: the config must be a mapping of fields (" + topKnown + "), got !!seq", ""},

		// Bytes that are not YAML.
		{"PNG", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
			"bad.yaml:1: not a YAML text file: byte 0x89 at column 1 is not UTF-8", ""},
		{"NUL in a value", "rules:\n  - name: a\x00b\n",
			"bad.yaml:2: not a YAML text file: control character U+0000 at column 12", ""},
		{"bad byte after CRLF lines", "name: a\r\nhttp_addr: b\r\n\xff\r\n",
			"bad.yaml:3: not a YAML text file: byte 0xFF at column 1 is not UTF-8", ""},

		// Keys and merges the decoder follows itself.
		{"key not a name", goodRules + "? [a, b]\n: 1\n", "bad.yaml:6: a key must be a field name, got !!seq", ""},
		{"merge of a scalar", "rules:\n  - <<: 5\n    name: a\n",
			"bad.yaml:2: rule 1 \"a\": << must be a mapping or a list of mappings, got !!int `5`", "<<"},
		{"merge list holding a scalar", "rules:\n  - <<: [{count: 1}, x]\n    name: a\n    time_window: 1\n",
			"bad.yaml:2: rule 1 \"a\": << must be a mapping or a list of mappings, got a list holding !!str `x`", "<<"},
		{"merge of itself", "rules:\n  - &r\n    name: a\n    <<: *r\n",
			"bad.yaml:4: rule 1 \"a\": << must not merge the mapping it is in", "<<"},
		{"unknown field in a merged mapping", "rules:\n  - <<: {count: 1, cuont: 2}\n    name: a\n    time_window: 1\n",
			`bad.yaml:2: rule 1 "a": unknown field "cuont" (known fields: ` + ruleKnown + `)`, "cuont"},

		// Several problems come in the order of the file, whatever level
		// they are found at.
		{"file order", "rules:\n  - name: api\n    count: x\n    time_window: 1\nhttp_addr: nope\nname: a\nname: b\n",
			"bad.yaml:3: rule 1 \"api\": count must be an integer, got !!str `x`\n" +
				"bad.yaml:5: http_addr must be HOST:PORT, got \"nope\": address nope: missing port in address\n" +
				"bad.yaml:7: mapping key \"name\" already defined at line 6", "count"},
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
				t.Fatalf("error %T is not an *Error", err)
			}
			if ce.Field != tt.wantField {
				t.Errorf("Field = %q, want %q", ce.Field, tt.wantField)
			}
		})
	}
}

// TestParseEveryFieldIsRead gives every known field a value no field takes,
// and expects each to be rejected by name: a field listed as known but not
// decoded would be silently dropped instead.
func TestParseEveryFieldIsRead(t *testing.T) {
	for _, f := range topFields {
		t.Run(f, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(f+": {x: 1}\n"))
			e, ok := errors.AsType[*Error](err)
			// tls is a mapping: its unknown field x is tls.x.
			if !ok || e.Field != f && e.Field != tlsPrefix+"x" || e.Line != 1 {
				t.Fatalf("error %v, want one about %s on line 1", err, f)
			}
		})
	}
	for _, f := range tlsFields {
		t.Run("tls "+f, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("tls:\n")
			for _, other := range tlsFields {
				switch other {
				case f:
				case "require_client_cert":
					b.WriteString("  require_client_cert: true\n")
				default:
					fmt.Fprintf(&b, "  %s: x\n", other)
				}
			}
			fmt.Fprintf(&b, "  %s: {x: 1}\n", f)
			_, err := Parse("f.yaml", []byte(b.String()+goodRules))
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Field != tlsPrefix+f || e.Line != len(tlsFields)+1 {
				t.Fatalf("error %v, want one about tls.%s on line %d", err, f, len(tlsFields)+1)
			}
		})
	}
	for _, f := range ruleFields {
		t.Run("rule "+f, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte("rules:\n  - "+f+": {x: 1}\n"))
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Field != f || e.Line != 2 || e.Rule != 1 {
				t.Fatalf("error %v, want one about %s in rule 1 on line 2", err, f)
			}
		})
	}
}

// TestParseYAMLFeatures checks what the decoder follows itself: aliases,
// merge precedence, nulls as left-out fields, tags, line endings and UTF-16.
func TestParseYAMLFeatures(t *testing.T) {
	utf16le := func(s string) string {
		b := []byte{0xFF, 0xFE}
		for _, u := range utf16.Encode([]rune(s)) {
			b = append(b, byte(u), byte(u>>8))
		}
		return string(b)
	}
	tests := []struct {
		name  string
		yaml  string
		want  Config // Path and Rules are not compared
		rules []window.Rule
	}{
		{
			name: "aliased values",
			yaml: "rules: [{name: a, count: &n 10, time_window: *n, window_type: &t fixed}, {name: b, count: *n, time_window: 20, window_type: *t}]",
			rules: []window.Rule{
				{Name: "a", Count: 10, Window: 10 * time.Second, Type: window.Fixed, SyncInterval: 200 * time.Millisecond},
				{Name: "b", Count: 10, Window: 20 * time.Second, Type: window.Fixed, SyncInterval: 200 * time.Millisecond},
			},
		},
		{
			name: "own keys beat merged, the first merged beats the next",
			yaml: `rules:
  - &slow {name: slow, count: 1, time_window: 60, sync_interval: 1}
  - &fast {name: fast, count: 2, time_window: 1, sync_interval: 0.1}
  - <<: [*fast, *slow, {window_type: fixed}]
    name: mixed
    count: 3
`,
			rules: []window.Rule{
				{Name: "slow", Count: 1, Window: time.Minute, SyncInterval: time.Second},
				{Name: "fast", Count: 2, Window: time.Second, SyncInterval: 100 * time.Millisecond},
				{Name: "mixed", Count: 3, Window: time.Second, Type: window.Fixed, SyncInterval: 100 * time.Millisecond},
			},
		},
		{
			name: "merge at the top level",
			yaml: "<<: {name: merged, grpc_addr: ':0'}\nname: own\n" + goodRules,
			want: Config{Name: "own", GRPCAddr: ":0"},
			rules: []window.Rule{{Name: "api", Count: 10, Window: 10 * time.Second,
				SyncInterval: 200 * time.Millisecond}},
		},
		{
			name:  "nulls leave fields out",
			yaml:  "name: ~\njoin:\nstrict_voters: null\nrules:\n  - name: a\n    count: 1\n    time_window: 1\n    sync_interval: ~\n    allocation:\n",
			rules: []window.Rule{{Name: "a", Count: 1, Window: time.Second, SyncInterval: 200 * time.Millisecond}},
		},
		{
			name:  "tags",
			yaml:  "rules: [{name: !!str 42, count: !!float 3, time_window: !!int 7}]",
			rules: []window.Rule{{Name: "42", Count: 3, Window: 7 * time.Second, SyncInterval: 200 * time.Millisecond}},
		},
		{
			name:  "CRLF and a byte order mark",
			yaml:  "\ufeffname: n\r\n" + strings.ReplaceAll(goodRules, "\n", "\r\n"),
			want:  Config{Name: "n"},
			rules: []window.Rule{{Name: "api", Count: 10, Window: 10 * time.Second, SyncInterval: 200 * time.Millisecond}},
		},
		{
			name:  "UTF-16",
			yaml:  utf16le("name: ü\nrules: [{name: a, count: 1, time_window: 1}]\n"),
			want:  Config{Name: "ü"},
			rules: []window.Rule{{Name: "a", Count: 1, Window: time.Second, SyncInterval: 200 * time.Millisecond}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("f.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if cfg.Name != tt.want.Name || cfg.GRPCAddr != tt.want.GRPCAddr || cfg.Join != nil {
				t.Errorf("got %+v, want %+v", *cfg, tt.want)
			}
			rules, err := cfg.NodeRules()
			if err != nil {
				t.Fatalf("NodeRules: %v", err)
			}
			if len(rules) != len(tt.rules) {
				t.Fatalf("got %d rules, want %d", len(rules), len(tt.rules))
			}
			for i := range rules {
				if !rules[i].Equal(tt.rules[i]) {
					t.Errorf("rule %d = %+v, want %+v", i, rules[i], tt.rules[i])
				}
			}
		})
	}
}

func TestNodeConfig(t *testing.T) {
	cfg, err := Parse("n.yaml", []byte(`name: n1
grpc_addr: 127.0.0.1:7070
gossip_addr: 127.0.0.1:7946
advertise_addr: 10.0.0.1:7946
join: [127.0.0.1:7947]
data_dir: /tmp/d
raft_addr: 127.0.0.1:7072
raft_advertise_addr: 10.0.0.1:7072
strict_voters: 5
strict_timeout: 2
borrow_timeout: 0.1
strict_bootstrap_wait: 0.5
persist_interval: 0.000000001
reconnect_interval: 3600
max_keys: 50000
tls:
  cert_file: n.pem
  key_file: n.key
  peer_ca_file: peer.pem
  client_ca_file: client.pem
  require_client_cert: true
secret_keys: [MDEyMzQ1Njc4OWFiY2RlZg==]
gossip_plaintext: accept
`+goodRules))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.NodeConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := cluster.Config{Name: "n1", GRPCAddr: "127.0.0.1:7070", BindAddr: "127.0.0.1:7946",
		AdvertiseAddr: "10.0.0.1:7946", DataDir: "/tmp/d", RaftAddr: "127.0.0.1:7072",
		RaftAdvertiseAddr: "10.0.0.1:7072", StrictVoters: 5, StrictTimeout: 2 * time.Second,
		BorrowTimeout: 100 * time.Millisecond, StrictBootstrapWait: 500 * time.Millisecond,
		PersistInterval: time.Nanosecond, ReconnectInterval: time.Hour, MaxKeys: 50_000}
	if got.Name != want.Name || got.GRPCAddr != want.GRPCAddr || got.BindAddr != want.BindAddr ||
		got.AdvertiseAddr != want.AdvertiseAddr || got.DataDir != want.DataDir || got.RaftAddr != want.RaftAddr ||
		got.RaftAdvertiseAddr != want.RaftAdvertiseAddr || got.StrictVoters != want.StrictVoters ||
		got.StrictTimeout != want.StrictTimeout || got.BorrowTimeout != want.BorrowTimeout ||
		got.StrictBootstrapWait != want.StrictBootstrapWait || got.PersistInterval != want.PersistInterval ||
		got.ReconnectInterval != want.ReconnectInterval || got.MaxKeys != want.MaxKeys || len(got.Join) != 1 || got.Join[0] != "127.0.0.1:7947" {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if want := (cluster.TLS{CertFile: "n.pem", KeyFile: "n.key", PeerCAFile: "peer.pem", ClientCAFile: "client.pem",
		RequireClientCert: true}); got.TLS == nil || !reflect.DeepEqual(*got.TLS, want) || got.Insecure {
		t.Errorf("TLS %+v, Insecure %v; want %+v and false", got.TLS, got.Insecure, want)
	}
	if len(got.SecretKeys) != 1 || string(got.SecretKeys[0]) != "0123456789abcdef" || got.GossipPlaintext != cluster.PlaintextAccepted {
		t.Errorf("SecretKeys %q, GossipPlaintext %v; want [0123456789abcdef] and accept", got.SecretKeys, got.GossipPlaintext)
	}
	if len(got.Rules) != 1 || got.Rules[0].Name != "api" {
		t.Errorf("rules %+v, want api", got.Rules)
	}

	// A config built in code is checked as the file would be.
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	bad := Config{Path: "p.yaml", StrictTimeout: -1, ReconnectInterval: 7200,
		Rules: []Rule{{Name: "a", Count: n(1), TimeWindow: f(1)}}}
	_, err = bad.NodeConfig()
	wantErr := "p.yaml: strict_timeout must be seconds in (0, 3600], got -1\n" +
		"p.yaml: reconnect_interval must be seconds in (0, 3600], got 7200"
	if err == nil || err.Error() != wantErr {
		t.Errorf("error %v, want %s", err, wantErr)
	}
	for _, tt := range []struct {
		file string
		want int
	}{
		{"", 0}, // the node's default
		{"max_keys: 0\n", 0},
		{"max_keys: -1\n", -1},
		{"max_keys: -5\n", -1},
		{"max_keys: 1e6\n", 1_000_000},
		{"max_keys: 99999999999\n", math.MaxInt32},
	} {
		c, err := Parse("m.yaml", []byte(tt.file+goodRules))
		if err != nil {
			t.Fatalf("%q: %v", tt.file, err)
		}
		if nc, err := c.NodeConfig(); err != nil || nc.MaxKeys != tt.want {
			t.Errorf("%q: MaxKeys %d (%v), want %d", tt.file, nc.MaxKeys, err, tt.want)
		}
	}
	if _, err := (&Config{Path: "p.yaml"}).NodeConfig(); err == nil || err.Error() != "p.yaml: rules: at least one rule is required" {
		t.Errorf("no rules: error %v", err)
	}
}
