package envoyrls

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/counter"
)

// matchConfig is the tree the matching tests walk.
const matchConfig = `domain: m
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: path
    value: /api/v1/action
    rate_limit: {unit: minute, requests_per_unit: 40}
  - key: empty
    value: "*"
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: empty
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: key5
    value: value5
    rate_limit: {unit: day, requests_per_unit: 15}
    descriptors:
      - key: subkey5
        value: subvalue5
        rate_limit: {unit: day, requests_per_unit: 25}
  - key: key2
    value: value3
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
`

func TestMatch(t *testing.T) {
	dom, err := Parse("m.yaml", []byte(matchConfig))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		entries []string // key, value pairs
		// wantPath is the descriptor whose limit applies, "" for none;
		// wantKey the key counted under.
		wantPath, wantKey string
	}{
		{"key without value: a limit per value", []string{"remote_address", "10.0.0.1"},
			"remote_address", "remote_address=10.0.0.1"},
		{"key and value before key alone", []string{"remote_address", "50.0.0.5"},
			"remote_address_50.0.0.5", "remote_address=50.0.0.5"},
		{"exact before wildcards", []string{"path", "/api/v1/action"},
			"path_/api/v1/action", "path=/api/v1/action"},
		{"the first wildcard that matches, in file order", []string{"path", "/api/v2/action"},
			"path_/api/*/action", "path=/api/v2/action"},
		{"a later wildcard", []string{"path", "/api/v2/other"}, "path_/api/*", "path=/api/v2/other"},
		{"no wildcard, no key alone", []string{"path", "/other"}, "", ""},
		{"an empty value matches a lone *", []string{"empty", ""}, "empty_*", "empty="},
		{"share_threshold counts under the pattern", []string{"files", "files/a.pdf"}, "files_files/*", "files=files/*"},
		{"nested", []string{"message_type", "marketing", "to_number", "2061111111"},
			"message_type_marketing.to_number", "message_type=marketing|to_number=2061111111"},
		{"the top-level limit of the same key", []string{"to_number", "2061111111"}, "to_number", "to_number=2061111111"},
		{"a placeholder has no limit", []string{"message_type", "marketing"}, "", ""},
		{"more entries than the tree is deep", []string{"remote_address", "1.2.3.4", "path", "/"}, "", ""},
		{"a limit with nested descriptors", []string{"key5", "value5"}, "key5_value5", "key5=value5"},
		{"its nested limit", []string{"key5", "value5", "subkey5", "subvalue5"}, "key5_value5.subkey5_subvalue5",
			"key5=value5|subkey5=subvalue5"},
		{"nested miss", []string{"key5", "value5", "subkey5", "other"}, "", ""},
		{"a value without a limit whitelists it", []string{"key2", "value3"}, "", ""},
		{"other values of that key", []string{"key2", "value4"}, "key2", "key2=value4"},
		{"unknown key", []string{"nope", "x"}, "", ""},
		{"no entries", nil, "", ""},
		{"separators in values are escaped", []string{"message_type", "marketing", "to_number", `a|b\c`},
			"message_type_marketing.to_number", `message_type=marketing|to_number=a\|b\\c`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim, key := dom.root.match(desc(tt.entries...).Entries)
			path := ""
			if lim != nil {
				path = lim.descriptor
			}
			if path != tt.wantPath || key != tt.wantKey {
				t.Errorf("matched %q key %q, want %q key %q", path, key, tt.wantPath, tt.wantKey)
			}
		})
	}
	// An unknown domain has no tree, and matches nothing.
	var none *tree
	if lim, _ := none.match(desc("a", "b").Entries); lim != nil {
		t.Errorf("nil tree matched %+v", lim)
	}
}

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pattern, value string
		want           bool
	}{
		{"foo*", "foo", true},
		{"foo*", "foobar", true},
		{"foo*", "fo", false},
		{"bar*b", "barb", true},
		{"bar*b", "barxyzb", true},
		{"bar*b", "bar", false},
		{"ab*ab", "ab", false},
		{"ab*ab", "abab", true},
		{"foo*bar*baz", "foo1bar2baz", true},
		{"foo*bar*baz", "foobarbaz", true},
		{"foo*bar*baz", "foo1baz", false},
		{"foo*bar*baz", "foobazbar", false},
		{"*", "", true},
		{"**", "x", true},
		{"/api/*/action", "/api/123/other", false},
	}
	for _, tt := range tests {
		if got := wildcardMatch(strings.Split(tt.pattern, "*"), tt.value); got != tt.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tt.pattern, tt.value, got, tt.want)
		}
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("k", 200)
	tests := []struct {
		domain, path, want string
	}{
		{"edge", "remote_address", "edge.remote_address"},
		{"edge", "remote_address_50.0.0.5", "edge.remote_address_50.0.0.5"},
		{"gw", "PATH_/login", "gw.PATH_:2Flogin"},
		{"a:b", "k_x y", "a:3Ab.k_x:20y"},
		{"d", "k_é", "d.k_:C3:A9"},
	}
	for _, tt := range tests {
		if got := ruleName(tt.domain, tt.path); got != tt.want {
			t.Errorf("ruleName(%q, %q) = %q, want %q", tt.domain, tt.path, got, tt.want)
		}
	}
	a, b := ruleName("d", long+"a"), ruleName("d", long+"b")
	if len(a) != 128 || a == b || !strings.HasPrefix(a, "d.kkk") {
		t.Errorf("long names %q and %q: want 128 bytes each, different", a, b)
	}
	if ruleName("d", long+"a") != a {
		t.Errorf("ruleName is not deterministic")
	}

	entries := desc("k", strings.Repeat("v", 2000)).Entries
	matched := []*tree{{}}
	k1 := checkKey(entries, matched)
	entries[0].Value += "w"
	k2 := checkKey(entries, matched)
	if len(k1) != 1024 || len(k2) != 1024 || k1 == k2 || !strings.HasPrefix(k1, "k=vvv") {
		t.Errorf("long keys of %d and %d bytes, equal %v; want 1024 each, different", len(k1), len(k2), k1 == k2)
	}

	// Keys a node takes: UTF-8 and at most 1024 bytes, one per value.
	seen := map[string]string{}
	for _, v := range []string{
		"ok", "é", "\xff", "\xfe", "a\xffb", "a\xfeb", "\xed\xa0\x80", "a?b", "?",
		strings.Repeat("é", 600),           // cut inside a rune
		strings.Repeat("é", 600) + "x",     // another long one
		strings.Repeat("v", 1500) + "\xff", // long, not UTF-8 past the cut
		strings.Repeat("v", 1500) + "\xfe",
		strings.Repeat("\xff", 10),
		strings.Repeat("\xff", 9) + "\xfe",
	} {
		key := checkKey(desc("k", v).Entries, matched)
		if !utf8.ValidString(key) || len(key) == 0 || len(key) > counter.MaxKeyLen {
			t.Errorf("value %q: key %q (%d bytes) is not one a node takes", v, key, len(key))
		}
		if other, ok := seen[key]; ok {
			t.Errorf("values %q and %q share the key %q", other, v, key)
		}
		seen[key] = v
		if again := checkKey(desc("k", v).Entries, matched); again != key {
			t.Errorf("value %q: key %q, then %q", v, key, again)
		}
	}
	if got := checkKey(desc("k", "a\xffb").Entries, matched); !strings.HasPrefix(got, "k=a?b#") || len(got) != len("k=a?b#")+32 {
		t.Errorf("a value that is not UTF-8 is counted under %q, want k=a?b# and a hash", got)
	}
}
