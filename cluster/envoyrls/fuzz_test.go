package envoyrls

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzParse checks that Parse never panics and either rejects a file with
// errors that each name the file and a line inside it, or returns a domain
// whose rules all validate, with unique names, one for each counted limit
// of its tree. Seeds: the example config, the tests' configs, and configs
// shaped like envoyproxy/ratelimit's own tests.
func FuzzParse(f *testing.F) {
	examples, err := filepath.Glob("../../examples/envoy/ratelimit*.yaml")
	if err != nil || len(examples) == 0 {
		f.Fatalf("found no example configs (%v)", err)
	}
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		serverConfig,
		matchConfig,
		"domain: d\n",
		"",
		"domain: d\ndescriptors:\n  - key: k\n    value: v*w*\n    share_threshold: true\n    rate_limit: {unit: Second, requests_per_unit: 4294967295}\n",
		"domain: d\ndescriptors:\n  - &a {key: k, rate_limit: {unit: hour, requests_per_unit: 1}}\n  - <<: *a\n    value: v\n",
		"domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - key: k\n        descriptors:\n          - key: k\n            rate_limit: {unit: day, requests_per_unit: 1, name: n, replaces: [{name: m}]}\n",
		"domain: d\ndescriptors:\n  - key: k\n    window_type: sliding\n    fail_mode: open\n    rate_limit: {unit: minute, requests_per_unit: 3, sync_interval: -1}\n",
		"domain: d\ndescriptors:\n  - key: a.b\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: a\n    descriptors: [{key: b, rate_limit: {unit: second, requests_per_unit: 1}}]\n",
		"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: yes}\n    shadow_mode: on\n    metadata: {a: [1, 2]}\n",
		"domain: [\n",
		"domain: a\n---\ndomain: b\n",
		"\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dom, err := Parse("fuzz.yaml", data)
		_, again := Parse("fuzz.yaml", data)
		if errText(err) != errText(again) {
			t.Fatalf("two parses disagree:\n%v\n---\n%v", err, again)
		}
		if err != nil {
			if dom != nil {
				t.Fatalf("got a domain with error %v", err)
			}
			checkErrors(t, data, err)
			return
		}
		checkAccepted(t, dom)
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkErrors checks that every error in err is an *Error with text, naming
// the file and a line that is in data.
func checkErrors(t *testing.T, data []byte, err error) {
	t.Helper()
	if err.Error() == "" {
		t.Fatal("empty error text")
	}
	lines := lineCount(data)
	leaves := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		leaves = j.Unwrap()
	}
	for _, leaf := range leaves {
		var e *Error
		if !errors.As(leaf, &e) || e != leaf {
			t.Fatalf("error %T %q is not an *Error", leaf, leaf)
		}
		if e.Path != "fuzz.yaml" || e.Err == nil {
			t.Fatalf("error %q: Path %q, Err %v", e, e.Path, e.Err)
		}
		if e.Line < 0 || lines > 0 && e.Line > lines {
			t.Fatalf("error %q names line %d of a file of %d lines", e, e.Line, lines)
		}
	}
}

// lineCount is the number of lines in data as YAML counts them, or 0 when
// data is UTF-16, which is counted differently.
func lineCount(data []byte) int {
	if bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF}) {
		return 0
	}
	n := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		i += size
		switch {
		case r == '\r' && i < len(data) && data[i] == '\n':
		case r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
			n++
		}
	}
	return n
}

// checkAccepted checks that an accepted domain's rules validate, have
// unique names, and are those of its tree's counted limits.
func checkAccepted(t *testing.T, dom *Domain) {
	t.Helper()
	if dom.Name == "" {
		t.Fatal("accepted a domain without a name")
	}
	names := map[string]bool{}
	for _, r := range dom.Rules() {
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted rule %q does not validate: %v", r.Name, err)
		}
		if names[r.Name] {
			t.Fatalf("accepted duplicate rule name %q", r.Name)
		}
		names[r.Name] = true
	}
	counted := 0
	var walk func(n *tree, depth int)
	walk = func(n *tree, depth int) {
		if depth > maxDepth+1 {
			t.Fatalf("tree deeper than %d", maxDepth)
		}
		if l := n.limit; l != nil && l.rule != "" {
			counted++
			if !names[l.rule] {
				t.Fatalf("limit %q counts under rule %q, which the domain lacks", l.descriptor, l.rule)
			}
			if l.perUnit == 0 || l.unlimited {
				t.Fatalf("limit %q counts, with %d per unit, unlimited %v", l.descriptor, l.perUnit, l.unlimited)
			}
		}
		for _, c := range n.exact {
			walk(c, depth+1)
		}
		for _, c := range n.any {
			walk(c, depth+1)
		}
	}
	walk(dom.root, 0)
	if counted != len(names) {
		t.Fatalf("%d counted limits, %d rules", counted, len(names))
	}
	if _, err := NewLimits(dom); err != nil {
		t.Fatalf("NewLimits of an accepted domain: %v", err)
	}
}
