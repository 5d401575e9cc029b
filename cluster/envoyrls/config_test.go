package envoyrls

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// batched is a batched rule with the defaults a file with none of sluice's
// fields gets: a fixed window, the default sync interval, owner allocation.
func batched(name string, count int64, w time.Duration) window.Rule {
	return window.Rule{Name: name, Count: count, Window: w, Type: window.Fixed}.WithDefaults()
}

// TestParseUpstreamExamples reads configs in the shapes of
// envoyproxy/ratelimit's README and of Envoy's rate limit actions
// (remote_address, generic_key, request_headers, header_value_match), as
// their users write them.
func TestParseUpstreamExamples(t *testing.T) {
	tests := []struct {
		name       string
		yaml       string
		wantDomain string
		wantRules  []window.Rule
	}{
		{
			name: "per IP, and one address blocked",
			yaml: `domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`,
			wantDomain: "edge_proxy_per_ip",
			wantRules:  []window.Rule{batched("edge_proxy_per_ip.remote_address", 10, time.Second)},
		},
		{
			name: "generic_key",
			yaml: `domain: envoy
descriptors:
  - key: generic_key
    value: default
    rate_limit:
      unit: MINUTE
      requests_per_unit: 100
`,
			wantDomain: "envoy",
			wantRules:  []window.Rule{batched("envoy.generic_key_default", 100, time.Minute)},
		},
		{
			name: "database: users",
			yaml: `---
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`,
			wantDomain: "mongo_cps",
			wantRules: []window.Rule{batched("mongo_cps.database_users", 500, time.Second),
				batched("mongo_cps.database_default", 500, time.Second)},
		},
		{
			name: "header match, nested, with sluice's fields",
			yaml: `domain: gateway
descriptors:
  - key: header_match
    value: api-path
    descriptors:
      - key: x-user-id
        window_type: sliding
        rate_limit:
          unit: hour
          requests_per_unit: 1000
          sync_interval: 0.5
          allocation: adaptive
  - key: PATH
    value: "/login"
    rate_limit: {unit: day, requests_per_unit: 5, sync_interval: -1, fail_mode: closed}
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: week
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: year
      requests_per_unit: 100
  - key: ldap
    rate_limit:
      unlimited: true
  - key: month
    rate_limit: {unit: month, requests_per_unit: 7}
`,
			wantDomain: "gateway",
			wantRules: []window.Rule{
				{Name: "gateway.header_match_api-path.x-user-id", Count: 1000, Window: time.Hour, Type: window.Sliding,
					SyncInterval: 500 * time.Millisecond, Allocation: window.Adaptive},
				{Name: "gateway.PATH_:2Flogin", Count: 5, Window: 24 * time.Hour, Type: window.Fixed,
					SyncInterval: window.Strict, FailMode: window.FailClosed},
				batched("gateway.message_type_marketing.to_number", 5, 7*24*time.Hour),
				batched("gateway.to_number", 100, 365*24*time.Hour),
				batched("gateway.month", 7, 30*24*time.Hour),
			},
		},
		{
			name: "shadow_mode, replaces, metrics fields, wildcards",
			yaml: `domain: rl
descriptors:
  - key: category
    value: account
    rate_limit:
      replaces:
        - name: bkthomps
      unit: minute
      requests_per_unit: 4
  - key: foo
    detailed_metric: true
    value_to_metric: false
    metadata: {team: {name: a}}
    descriptors:
      - key: bar
        value: bkthomps
        rate_limit: {name: bkthomps, unit: minute, requests_per_unit: 1}
      - key: baz
        value: shady
        shadow_mode: true
        quota_mode: false
        rate_limit: {unit: minute, requests_per_unit: 3}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
`,
			wantDomain: "rl",
			wantRules: []window.Rule{
				batched("rl.category_account", 4, time.Minute),
				batched("rl.foo.bar_bkthomps", 1, time.Minute),
				batched("rl.foo.baz_shady", 3, time.Minute),
				batched("rl.files_files:2F:2A", 10, time.Hour),
			},
		},
		{
			name:       "a domain without descriptors",
			yaml:       "domain: empty\n",
			wantDomain: "empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse("ratelimit.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d.Name != tt.wantDomain || d.Path != "ratelimit.yaml" {
				t.Errorf("domain %q from %q, want %q from ratelimit.yaml", d.Name, d.Path, tt.wantDomain)
			}
			rules := d.Rules()
			if len(rules) != len(tt.wantRules) {
				t.Fatalf("got %d rules %+v, want %d", len(rules), rules, len(tt.wantRules))
			}
			for i := range rules {
				if !rules[i].Equal(tt.wantRules[i]) {
					t.Errorf("rule %d = %+v, want %+v", i, rules[i], tt.wantRules[i])
				}
				if err := rules[i].Validate(); err != nil {
					t.Errorf("rule %d: %v", i, err)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	// desc builds a file whose one descriptor has the given lines (the
	// descriptor starts on line 3).
	desc := func(lines ...string) string {
		return "domain: d\ndescriptors:\n  - " + strings.Join(lines, "\n    ") + "\n"
	}
	const rl = "rate_limit:"
	tests := []struct {
		name      string
		yaml      string
		want      string // the whole error text
		wantField string
	}{
		{"empty file", "", "bad.yaml: the file is empty; a config needs a domain", "domain"},
		{"no domain", "descriptors: []\n", "bad.yaml:1: domain is required: the name requests give in their domain field", "domain"},
		{"empty domain", "domain: \"\"\n", "bad.yaml:1: domain must not be empty", "domain"},
		{"not a mapping", "- a\n", "bad.yaml:1: the config must be a mapping of fields (domain, descriptors), got !!seq", ""},
		{"syntax", "domain: [\n", "bad.yaml: yaml: line 1: did not find expected node content", ""},
		{"two documents", "domain: a\n---\ndomain: b\n", "bad.yaml:2: more than one YAML document; a config file holds one domain", ""},
		{"unknown top field", "domain: d\ndescriptor: []\n",
			`bad.yaml:2: domain "d": unknown field "descriptor" (known fields: domain, descriptors)`, "descriptor"},
		{"descriptors not a list", "domain: d\ndescriptors: 5\n",
			"bad.yaml:2: domain \"d\": descriptors must be a list of descriptors, got !!int `5`", "descriptors"},
		{"descriptor not a mapping", "domain: d\ndescriptors: [x]\n",
			"bad.yaml:2: domain \"d\": a descriptor must be a mapping of fields (key, value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata, window_type, sync_interval, allocation, fail_mode), got !!str `x`", ""},
		{"unknown descriptor field", desc("key: k", "ratelimit: {}"),
			`bad.yaml:4: domain "d": descriptor "k": unknown field "ratelimit" (known fields: key, value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata, window_type, sync_interval, allocation, fail_mode)`, "ratelimit"},
		{"rate_limit field on the descriptor", desc("key: k", "unit: second"),
			`bad.yaml:4: domain "d": descriptor "k": unknown field "unit" (known fields: key, value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata, window_type, sync_interval, allocation, fail_mode); unit is a field of rate_limit: write it inside the descriptor's rate_limit`, "unit"},
		{"unknown rate_limit field", desc("key: k", rl, "  unit: second", "  requests_per_unit: 1", "  unti: x"),
			`bad.yaml:7: domain "d": descriptor "k": unknown field "unti" (known fields: unit, requests_per_unit, unlimited, name, replaces, window_type, sync_interval, allocation, fail_mode)`, "unti"},
		{"descriptor field in rate_limit", desc("key: k", rl, "  unit: second", "  requests_per_unit: 1", "  shadow_mode: true"),
			`bad.yaml:7: domain "d": descriptor "k": unknown field "shadow_mode" (known fields: unit, requests_per_unit, unlimited, name, replaces, window_type, sync_interval, allocation, fail_mode); shadow_mode is a field of the descriptor: write it beside rate_limit`, "shadow_mode"},
		{"empty key", desc("value: v"), `bad.yaml:3: domain "d": descriptor "_v": key must not be empty`, "key"},
		{"duplicate descriptor", "domain: d\ndescriptors:\n  - key: k\n  - key: k\n    value: \"\"\n",
			`bad.yaml:4: domain "d": descriptor "k": duplicate descriptor composite key 'd.k'`, "key"},
		{"duplicate key", desc("key: k", "key: j"), `bad.yaml:4: domain "d": descriptor "k": mapping key "key" already defined at line 3`, "key"},
		{"bad unit", desc("key: k", rl, "  unit: fortnight", "  requests_per_unit: 1"),
			`bad.yaml:5: domain "d": descriptor "k": unit must be one of second, minute, hour, day, week, month or year, got "fortnight"`, "unit"},
		{"no unit", desc("key: k", "rate_limit: {requests_per_unit: 1}"),
			`bad.yaml:4: domain "d": descriptor "k": unit is required: one of second, minute, hour, day, week, month or year`, "unit"},
		{"no requests_per_unit", desc("key: k", "rate_limit: {unit: second}"),
			`bad.yaml:4: domain "d": descriptor "k": requests_per_unit is required: requests allowed per unit (0 refuses every request)`, "requests_per_unit"},
		{"negative requests_per_unit", desc("key: k", "rate_limit: {unit: second, requests_per_unit: -1}"),
			`bad.yaml:4: domain "d": descriptor "k": requests_per_unit must be 0 … 4294967295, got -1`, "requests_per_unit"},
		{"requests_per_unit too big", desc("key: k", "rate_limit: {unit: second, requests_per_unit: 4294967296}"),
			`bad.yaml:4: domain "d": descriptor "k": requests_per_unit must be 0 … 4294967295, got 4294967296`, "requests_per_unit"},
		{"requests_per_unit fraction", desc("key: k", "rate_limit: {unit: second, requests_per_unit: 1.5}"),
			"bad.yaml:4: domain \"d\": descriptor \"k\": requests_per_unit must be an integer, got !!float `1.5`", "requests_per_unit"},
		{"unit when unlimited", desc("key: k", rl, "  unlimited: true", "  unit: day"),
			`bad.yaml:6: domain "d": descriptor "k": unit must not be set when unlimited is true`, "unit"},
		{"sluice field when unlimited", desc("key: k", "window_type: sliding", "rate_limit: {unlimited: true}"),
			`bad.yaml:4: domain "d": descriptor "k": window_type has no meaning when unlimited is true: nothing is counted`, "window_type"},
		{"unlimited not a bool", desc("key: k", "rate_limit: {unlimited: maybe}"),
			"bad.yaml:4: domain \"d\": descriptor \"k\": unlimited must be true or false, got !!str `maybe`", "unlimited"},
		{"replaces without a name", desc("key: k", "rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}"),
			`bad.yaml:4: domain "d": descriptor "k": replaces[0] must have a name that is not empty`, "replaces"},
		{"replaces itself", desc("key: k", "rate_limit: {name: me, unit: second, requests_per_unit: 1, replaces: [{name: me}]}"),
			`bad.yaml:4: domain "d": descriptor "k": replaces[0] names this rate_limit's own name "me"`, "replaces"},
		{"replaces not a list", desc("key: k", "rate_limit: {unit: second, requests_per_unit: 1, replaces: me}"),
			"bad.yaml:4: domain \"d\": descriptor \"k\": replaces must be a list of {name: NAME}, got !!str `me`", "replaces"},
		{"quota_mode", desc("key: k", "quota_mode: true", "rate_limit: {unit: second, requests_per_unit: 1}"),
			`bad.yaml:4: domain "d": descriptor "k": quota_mode: true is not supported by sluice; remove it, or set it to false`, "quota_mode"},
		{"share_threshold without a wildcard", desc("key: k", "value: v", "share_threshold: true"),
			`bad.yaml:5: domain "d": descriptor "k_v": share_threshold can only be used with a wildcard value (containing '*'), got value "v"`, "share_threshold"},
		{"window_type", desc("key: k", "window_type: rolling", "rate_limit: {unit: second, requests_per_unit: 1}"),
			`bad.yaml:4: domain "d": descriptor "k": window_type must be fixed or sliding, got "rolling"`, "window_type"},
		{"allocation", desc("key: k", "rate_limit: {unit: second, requests_per_unit: 1, allocation: greedy}"),
			`bad.yaml:4: domain "d": descriptor "k": allocation must be owner, adaptive or classic, got "greedy"`, "allocation"},
		{"fail_mode", desc("key: k", "fail_mode: sideways", "rate_limit: {unit: second, requests_per_unit: 1, sync_interval: -1}"),
			`bad.yaml:4: domain "d": descriptor "k": fail_mode must be open, closed or local, got "sideways"`, "fail_mode"},
		{"sync_interval zero", desc("key: k", "sync_interval: 0", "rate_limit: {unit: second, requests_per_unit: 1}"),
			`bad.yaml:4: domain "d": descriptor "k": sync_interval must be -1 (strict) or ≥ 0.01 seconds and shorter than the unit, got 0; leave it out for the default (0.2, or a fifth of the unit if that is shorter)`, "sync_interval"},
		{"sync_interval not below the unit", desc("key: k", "rate_limit: {unit: second, requests_per_unit: 1, sync_interval: 1}"),
			`bad.yaml:4: domain "d": descriptor "k": sync_interval must be -1 (strict) or ≥ 10ms and < time_window (1s), got 1s`, "sync_interval"},
		{"sync_interval not a number", desc("key: k", "rate_limit: {unit: second, requests_per_unit: 1, sync_interval: fast}"),
			"bad.yaml:4: domain \"d\": descriptor \"k\": sync_interval must be a number of seconds, got !!str `fast`", "sync_interval"},
		{"sluice field twice", desc("key: k", "allocation: owner", rl, "  unit: second", "  requests_per_unit: 1", "  allocation: classic"),
			`bad.yaml:8: domain "d": descriptor "k": allocation is set on the descriptor (line 4) and in its rate_limit; set it once`, "allocation"},
		{"sluice field without a rate_limit", desc("key: k", "window_type: sliding"),
			`bad.yaml:4: domain "d": descriptor "k": window_type needs a rate_limit on this descriptor`, "window_type"},
		{"rate_limit not a mapping", desc("key: k", "rate_limit: 5"),
			"bad.yaml:4: domain \"d\": descriptor \"k\": rate_limit must be a mapping of fields (unit, requests_per_unit, unlimited, name, replaces, window_type, sync_interval, allocation, fail_mode), got !!int `5`", "rate_limit"},
		{"nested error names the path", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    descriptors:\n      - key: c\n        rate_limit: {unit: second, requests_per_unit: x}\n",
			"bad.yaml:7: domain \"d\": descriptor \"a_b.c\": requests_per_unit must be an integer, got !!str `x`", "requests_per_unit"},
		{"rule names meet", "domain: d\ndescriptors:\n  - key: a.b\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: second, requests_per_unit: 1}\n",
			`bad.yaml:8: domain "d": descriptor "a.b": rule name "d.a.b" is also that of descriptor "a.b" (line 4); rename a key`, ""},
		{"control character", "domain: d\x01\n", "bad.yaml:1: not a YAML text file: control character U+0001 at column 10", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("got %+v, want error %q", d, tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("error\n got: %s\nwant: %s", err, tt.want)
			}
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %T is not an *Error", err)
			}
			if e.Field != tt.wantField {
				t.Errorf("Field = %q, want %q", e.Field, tt.wantField)
			}
		})
	}
}

// TestParseReportsEveryProblem checks that one pass names every bad
// descriptor, in the order of the file.
func TestParseReportsEveryProblem(t *testing.T) {
	data := `domain: d
descriptors:
  - key: a
    rate_limit: {unit: sec, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1, window_type: slide}
`
	_, err := Parse("x.yaml", []byte(data))
	want := `x.yaml:4: domain "d": descriptor "a": unit must be one of second, minute, hour, day, week, month or year, got "sec"` + "\n" +
		`x.yaml:6: domain "d": descriptor "b": window_type must be fixed or sliding, got "slide"`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got: %v\nwant: %s", err, want)
	}
}

func TestNewLimits(t *testing.T) {
	parse := func(path, yaml string) *Domain {
		t.Helper()
		d, err := Parse(path, []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := parse("a.yaml", "domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	b := parse("b.yaml", "domain: x\n")
	c := parse("c.yaml", "domain: x.k\n")
	e := parse("e.yaml", "domain: x.k.j\ndescriptors:\n  - key: m\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	f := parse("f.yaml", "domain: x.k\ndescriptors:\n  - key: j.m\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	tests := []struct {
		name    string
		domains []*Domain
		want    string
		rules   int
	}{
		{"two domains", []*Domain{a, c}, "", 1},
		{"same domain twice", []*Domain{a, b}, `b.yaml: domain "x" is also the domain of a.yaml; one file per domain`, 0},
		{"rule names meet across domains", []*Domain{e, f},
			`f.yaml:4: domain "x.k": descriptor "j.m": rule name "x.k.j.m" is also that of a limit of domain "x.k.j" in e.yaml`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLimits(tt.domains...)
			if tt.want != "" {
				if err == nil || err.Error() != tt.want {
					t.Fatalf("error %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(l.Rules()); got != tt.rules {
				t.Errorf("%d rules, want %d", got, tt.rules)
			}
		})
	}

	l, err := NewLimits(a)
	if err != nil {
		t.Fatal(err)
	}
	own := []window.Rule{batched("api", 1, time.Second)}
	rules, err := l.AddTo(own, "sluice.yaml")
	if err != nil || len(rules) != 2 || rules[0].Name != "api" || rules[1].Name != "x.k" {
		t.Errorf("AddTo = %+v, %v; want api then x.k", rules, err)
	}
	_, err = l.AddTo([]window.Rule{batched("x.k", 1, time.Second)}, "sluice.yaml")
	if want := `a.yaml:4: domain "x": descriptor "k": rule name "x.k" is also that of a rule in sluice.yaml; rename one`; err == nil || err.Error() != want {
		t.Errorf("AddTo clash: error %v, want %q", err, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr string // substring; empty for success
	}{
		{"example", filepath.Join("..", "..", "examples", "envoy", "ratelimit.yaml"), ""},
		{"missing", filepath.Join(dir, "nope.yaml"), "no such file"},
		{"too big", big, "big.yaml: file is larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Load(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Path != tt.path || d.Name == "" || len(d.Rules()) == 0 {
				t.Errorf("got domain %q from %q with %d rules", d.Name, d.Path, len(d.Rules()))
			}
		})
	}
}
