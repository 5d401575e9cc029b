package configfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/cluster"
)

// FuzzParse checks that Parse never panics, that parsing the same bytes
// twice gives the same config or the same errors, and that it either
// rejects a file with an *Error, or *Errors joined, each naming the file
// and a line inside it (only the parser's own errors and a file that says
// nothing of its rules have none), or returns a config whose rules and
// settings all validate. Seeds: the example configs, the agent's built-in
// config, and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	var examples []string
	for _, pattern := range []string{"../../examples/*.yaml", "../../examples/*/*.yaml", "../../cmd/sluice/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		examples = append(examples, m...)
	}
	if len(examples) < 5 {
		f.Fatalf("found %d example configs (%q), want the 5 shipped", len(examples), examples)
	}
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		cfg2, again := Parse("fuzz.yaml", data)
		if errText(err) != errText(again) {
			t.Fatalf("two parses disagree:\n%v\n---\n%v", err, again)
		}
		if !reflect.DeepEqual(cfg, cfg2) {
			t.Fatalf("two parses give different configs:\n%+v\n---\n%+v", cfg, cfg2)
		}
		if err != nil {
			if cfg != nil {
				t.Fatalf("got a config with error %v", err)
			}
			checkErrors(t, data, err)
			return
		}
		checkAccepted(t, cfg)
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
		if e.Line == 0 && !lineless(e) {
			t.Fatalf("error %q names no line", e)
		}
	}
}

// lineless reports whether e is one of the errors that have no line of
// their own: the YAML parser's (its text says where it stopped), a panic
// of the parser caught, and a file or document that holds no rules, which
// is about what the file leaves out.
func lineless(e *Error) bool {
	text := e.Err.Error()
	switch {
	case strings.HasPrefix(text, "yaml: "), strings.HasPrefix(text, "malformed YAML: "):
		return e.Field == "" && e.Rule == 0
	case e.Field == "rules":
		return e.Rule == 0 && strings.HasPrefix(text, "rules: ")
	}
	return false
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

// checkAccepted checks that an accepted config's rules and settings
// validate, and that it converts to a node's config.
func checkAccepted(t *testing.T, cfg *Config) {
	t.Helper()
	rules, err := cfg.NodeRules()
	if err != nil {
		t.Fatalf("accepted config fails NodeRules: %v", err)
	}
	if len(rules) == 0 || len(rules) != len(cfg.Rules) {
		t.Fatalf("accepted config has %d rules, converted to %d", len(cfg.Rules), len(rules))
	}
	seen := map[string]bool{}
	for i := range rules {
		if err := rules[i].Validate(); err != nil {
			t.Fatalf("accepted rule %d does not validate: %v", i, err)
		}
		if seen[rules[i].Name] {
			t.Fatalf("accepted duplicate rule name %q", rules[i].Name)
		}
		seen[rules[i].Name] = true
	}
	for _, a := range []struct{ field, v string }{
		{"grpc_addr", cfg.GRPCAddr}, {"gossip_addr", cfg.GossipAddr}, {"advertise_addr", cfg.AdvertiseAddr},
		{"http_addr", cfg.HTTPAddr}, {"raft_addr", cfg.RaftAddr}, {"raft_advertise_addr", cfg.RaftAdvertiseAddr},
	} {
		if a.v == "" {
			continue
		}
		if err := cluster.CheckHostPort(a.field, a.v); err != nil {
			t.Fatalf("accepted %v", err)
		}
	}
	for i, j := range cfg.Join {
		if err := checkJoin(i, j); err != nil {
			t.Fatalf("accepted %v", err)
		}
	}
	if tc := cfg.TLS; tc != nil && (tc.CertFile == "" || tc.KeyFile == "" || tc.PeerCAFile == "" || cfg.Insecure) {
		t.Fatalf("accepted tls %+v with insecure %v", *tc, cfg.Insecure)
	}
	checkAcceptedKeys(t, cfg)
	nc, err := cfg.NodeConfig()
	switch e, _ := errors.AsType[*Error](err); {
	case err == nil:
	case cfg.SecretKeysFile != "" && e != nil && e.Field == "secret_keys_file":
		// The file it names is read now, and may be anything.
	default:
		t.Fatalf("accepted config fails NodeConfig: %v", err)
	}
	switch nc.StrictVoters {
	case 0, 1, 3, 5:
	default:
		t.Fatalf("accepted strict_voters %d", nc.StrictVoters)
	}
	for _, d := range []struct {
		field string
		v     float64
	}{{"strict_timeout", cfg.StrictTimeout}, {"borrow_timeout", cfg.BorrowTimeout},
		{"strict_bootstrap_wait", cfg.StrictBootstrapWait}, {"persist_interval", cfg.PersistInterval},
		{"reconnect_interval", cfg.ReconnectInterval}} {
		if !(d.v >= 0 && d.v <= 3600) {
			t.Fatalf("accepted %s %v", d.field, d.v)
		}
	}
}

// checkAcceptedKeys checks that accepted gossip keys are keys AES takes,
// at most cluster.MaxSecretKeys and none twice, from secret_keys or a
// secret_keys_file but not both, and that gossip_plaintext is a mode,
// given only with keys.
func checkAcceptedKeys(t *testing.T, cfg *Config) {
	t.Helper()
	if len(cfg.SecretKeys) > cluster.MaxSecretKeys {
		t.Fatalf("accepted %d secret keys", len(cfg.SecretKeys))
	}
	for i, k := range cfg.SecretKeys {
		if err := cluster.CheckSecretKey("secret_keys", k); err != nil {
			t.Fatalf("accepted %v", err)
		}
		for _, o := range cfg.SecretKeys[:i] {
			if bytes.Equal(o, k) {
				t.Fatalf("accepted secret key %d twice", i)
			}
		}
	}
	if len(cfg.SecretKeys) > 0 && cfg.SecretKeysFile != "" {
		t.Fatalf("accepted secret_keys beside secret_keys_file %q", cfg.SecretKeysFile)
	}
	p, err := cluster.ParseGossipPlaintext(cfg.GossipPlaintext)
	if err != nil {
		t.Fatalf("accepted %v", err)
	}
	if p != cluster.PlaintextRefused && len(cfg.SecretKeys) == 0 && cfg.SecretKeysFile == "" {
		t.Fatalf("accepted gossip_plaintext %s without keys", p)
	}
}
