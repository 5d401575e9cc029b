package main

import (
	"context"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string // substrings
		wantStderr []string // substrings
	}{
		{"no arguments", nil, 2, nil, []string{"usage: sluice COMMAND", "agent", "check", "sim", "version", "help"}},
		{"help", []string{"help"}, 0, []string{"usage: sluice COMMAND", "  agent    run a sluice node",
			"  check    ask a node", "  sim ", "  version ", "  help ", "Exit status: 0 success, 1 refused (check), 2 error."}, nil},
		{"--help", []string{"--help"}, 0, []string{"usage: sluice COMMAND"}, nil},
		{"help agent", []string{"help", "agent"}, 0, []string{"usage: sluice agent", "  --grpc-addr HOST:PORT", "127.0.0.1:7070"}, nil},
		{"help rules", []string{"help", "rules"}, 0, []string{"usage: sluice rules", "  --addr HOST:PORT"}, nil},
		{"help lists rules", []string{"help"}, 0, []string{"  rules    list the rules a node enforces", "sluice --version",
			"Run 'sluice COMMAND --help'", `{"error": "…", "code": "unavailable"}`}, nil},
		{"check -h", []string{"check", "-h"}, 0, []string{"usage: sluice check", "Exit status: 0 allowed, 1 refused, 2 error"}, nil},
		{"agent --help", []string{"agent", "--help"}, 0, []string{"usage: sluice agent", "  --config FILE"}, nil},
		{"unknown command", []string{"nope"}, 2, nil, []string{"sluice: unknown command \"nope\"; run 'sluice help' for the list\n"}},
		{"help unknown", []string{"help", "nope"}, 2, nil, []string{`unknown command "nope"`}},
		{"mistyped command", []string{"chek", "--rule", "api"}, 2, nil, []string{"sluice: unknown command \"chek\"; did you mean \"check\"?\n"}},
		{"mistyped transposed", []string{"memebrs"}, 2, nil, []string{"sluice: unknown command \"memebrs\"; did you mean \"members\"?\n"}},
		{"help mistyped", []string{"help", "rulse"}, 2, nil, []string{"sluice: unknown command \"rulse\"; did you mean \"rules\"?\n"}},
		{"mistyped help", []string{"hepl"}, 2, nil, []string{"sluice: unknown command \"hepl\"; did you mean \"help\"?\n"}},
		{"version", []string{"version"}, 0, []string{"sluice ", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}, nil},
		{"--version", []string{"--version"}, 0, []string{"sluice ", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}, nil},
		{"-version", []string{"-version"}, 0, []string{"sluice ", runtime.Version()}, nil},
		{"--version -h", []string{"--version", "-h"}, 0, []string{"usage: sluice version"}, nil},
		{"version stray", []string{"version", "x"}, 2, nil, []string{"sluice version: unexpected argument \"x\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if len(tt.wantStdout) == 0 && stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

// TestVersionFlag: `sluice --version` prints what `sluice version` does.
func TestVersionFlag(t *testing.T) {
	_, want, _ := runCmd(context.Background(), "version")
	for _, args := range [][]string{{"--version"}, {"-version"}} {
		code, stdout, stderr := runCmd(context.Background(), args...)
		if code != 0 || stdout != want || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, stdout, stderr, want)
		}
	}
	if !strings.HasPrefix(want, "sluice ") || strings.Count(want, "\n") != 1 {
		t.Errorf("sluice version printed %q, want one line", want)
	}
}

func TestCheckErrors(t *testing.T) {
	addr := startTestAgent(t, agentTestConfig, agentTestEpoch)
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
		wantStderr string
	}{
		{"no rule", []string{"--key", "k"}, "sluice check: --rule is required\nrun 'sluice check --help' for usage\n"},
		{"no key", []string{"--rule", "fixed"}, "sluice check: --key is required\nrun 'sluice check --help' for usage\n"},
		{"bad timeout", []string{"--rule", "fixed", "--key", "k", "--timeout", "0s"}, "sluice check: --timeout must be positive, got 0s\nrun 'sluice check --help' for usage\n"},
		// Not sent: the node would refuse such a rule or key, and gRPC's
		// client cannot marshal it.
		{"key not UTF-8", []string{"--addr", addr, "--rule", "fixed", "--key", "user:\xff"},
			"sluice check: --key must be valid UTF-8, got byte 0xFF at offset 5\nrun 'sluice check --help' for usage\n"},
		{"rule not UTF-8", []string{"--addr", addr, "--rule", "fi\xc3xed", "--key", "k"},
			"sluice check: --rule must be valid UTF-8, got byte 0xC3 at offset 2\nrun 'sluice check --help' for usage\n"},
		{"bad hits flag", []string{"--rule", "fixed", "--key", "k", "--hits", "x"}, "sluice check: invalid value \"x\" for --hits: want a whole number\nrun 'sluice check --help' for usage\n"},
		{"mistyped flag", []string{"--rule", "fixed", "--key", "k", "--hit", "2"},
			"sluice check: unknown flag --hit; did you mean --hits?\nrun 'sluice check --help' for usage\n"},
		{"unknown rule", []string{"--addr", addr, "--rule", "nope", "--key", "k"},
			"sluice check: unknown rule \"nope\"; the node has fixed, sliding\n"},
		{"mistyped rule", []string{"--addr", addr, "--rule", "fixd", "--key", "k"},
			"sluice check: unknown rule \"fixd\"; did you mean \"fixed\"?\n"},
		{"negative hits", []string{"--addr", addr, "--rule", "fixed", "--key", "k", "--hits", "-1"},
			"sluice check: hits must be ≥ 0, got -1\n"},
		{"hits over count", []string{"--addr", addr, "--rule", "fixed", "--key", "k", "--hits", "4"},
			"sluice check: hits exceed the rule's count and can never be admitted: hits 4, rule \"fixed\" count 3\n"},
		{"key too long", []string{"--addr", addr, "--rule", "fixed", "--key", strings.Repeat("k", 1025)},
			"sluice check: key too long: 1025 bytes, at most 1024\n"},
		{"unreachable", []string{"--addr", closed, "--rule", "fixed", "--key", "k"},
			"sluice check: cannot reach " + closed + ": connection refused — is the agent running?\n"},
		{"addr without port", []string{"--addr", "127.0.0.1", "--rule", "fixed", "--key", "k"},
			"sluice check: --addr must be HOST:PORT, got \"127.0.0.1\": address 127.0.0.1: missing port in address\n" +
				"run 'sluice check --help' for usage\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), append([]string{"check"}, tt.args...)...)
			if code != 2 || stderr != tt.wantStderr || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2, stderr %q", code, stdout, stderr, tt.wantStderr)
			}
		})
	}
}

func TestVersionString(t *testing.T) {
	build := func(version string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/sluicehq/sluice", Version: version}, Settings: settings}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	tests := []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"stamped wins", "v1.2.3", build("v0.9.0", rev), "v1.2.3"},
		{"module version", "", build("v0.9.0"), "v0.9.0"},
		{"devel build", "", build("(devel)"), "devel"},
		{"no build info", "", nil, "devel"},
		{"revision", "", build("(devel)", rev), "devel (0123456789ab)"},
		{"dirty revision", "", build("v0.9.0", rev, dirty), "v0.9.0 (0123456789ab-dirty)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionString(tt.stamped, tt.info); got != tt.want {
				t.Errorf("versionString = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCeilMillis(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0s", "0s"}, {"-1s", "0s"}, {"1ns", "1ms"}, {"1ms", "1ms"}, {"1.0000001s", "1.001s"}, {"11.333333334s", "11.334s"},
	}
	for _, tt := range tests {
		in, _ := time.ParseDuration(tt.in)
		if got := ceilMillis(in).String(); got != tt.want {
			t.Errorf("ceilMillis(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
