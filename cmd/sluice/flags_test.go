package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// testFlagSet has a flag of each kind the commands use.
func testFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.String("addr", "127.0.0.1:7070", "gRPC address, `HOST:PORT`")
	fs.String("mode", "", "batched or strict")
	fs.Int64("hits", 1, "cost of the request")
	fs.Int("nodes", 0, "number of nodes")
	fs.Float64("rate", 800, "requests/s")
	fs.Duration("timeout", 2*time.Second, "give up after this long")
	fs.Duration("shift", 0, "when to shift")
	fs.Bool("json", false, "print JSON")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "log `LEVEL`")
	return fs
}

func TestPrintFlags(t *testing.T) {
	fs := testFlagSet()
	var b strings.Builder
	fs.SetOutput(&b)
	printFlags(fs)
	want := "" +
		"  --addr HOST:PORT\n        gRPC address, HOST:PORT (default \"127.0.0.1:7070\")\n" +
		"  --hits N\n        cost of the request (default 1)\n" +
		"  --json\n        print JSON\n" +
		"  --log-level LEVEL\n        log LEVEL (default INFO)\n" +
		"  --mode MODE\n        batched or strict\n" +
		"  --nodes N\n        number of nodes\n" +
		"  --rate NUMBER\n        requests/s (default 800)\n" +
		"  --shift DURATION\n        when to shift\n" +
		"  --timeout DURATION\n        give up after this long (default 2s)\n"
	if b.String() != want {
		t.Errorf("listing\n got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"undefined", []string{"--nope"}, "unknown flag --nope"},
		{"undefined, one dash", []string{"-nope"}, "unknown flag --nope"},
		{"mistyped", []string{"--adr", "x:1"}, "unknown flag --adr; did you mean --addr?"},
		{"mistyped with value", []string{"--timout=1s"}, "unknown flag --timout; did you mean --timeout?"},
		{"not a whole number", []string{"--hits", "1.5"}, `invalid value "1.5" for --hits: want a whole number`},
		{"out of range", []string{"--nodes", "99999999999999999999"}, `invalid value "99999999999999999999" for --nodes: value out of range`},
		{"not a number", []string{"--rate", "fast"}, `invalid value "fast" for --rate: want a number`},
		{"not a duration", []string{"--timeout", "10"}, `invalid value "10" for --timeout: want a duration such as 2s or 500ms`},
		{"bad boolean", []string{"--json=yes"}, `invalid value "yes" for --json: want true or false`},
		{"missing value", []string{"--addr"}, "--addr needs a value"},
		{"bad text value", []string{"--log-level", "loud"}, `invalid value "loud" for --log-level: slog: level string "loud": unknown name`},
		{"bad syntax", []string{"---addr"}, "bad flag syntax: ---addr"},
		{"stray argument", []string{"--json", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := parseFlags(testFlagSet(), tt.args, io.Discard)
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseFlags = %v, want a usageError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}

func TestJSONAsked(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--json"}, true},
		{[]string{"-json"}, true},
		{[]string{"--json=true"}, true},
		{[]string{"--json=1"}, true},
		{[]string{"--json=false"}, false},
		{[]string{"--json", "--json=false"}, false},
		{[]string{"--json=false", "--json"}, true},
		{[]string{"--json=maybe"}, false},
		{[]string{"--", "--json"}, false},
		{[]string{"json"}, false},
		{[]string{"--jsonx"}, false},
		{[]string{"--nope", "--json"}, true},
	}
	for _, tt := range tests {
		fs := testFlagSet()
		fs.SetOutput(io.Discard)
		_ = fs.Parse(tt.args) // what was parsed before a mistake is set
		if got := jsonAsked(fs, tt.args); got != tt.want {
			t.Errorf("jsonAsked(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

// FuzzParseFlags feeds command lines to the flag parsing every command
// uses: it never panics, a mistake is a usageError on one line, and no
// message names a flag with one dash.
func FuzzParseFlags(f *testing.F) {
	for _, seed := range []string{"", "--addr\x00x:1", "-adr", "--hits\x00x", "--json=maybe", "---", "--", "-",
		"--timeout\x00-1s", "--log-level\x00\n", "--\u00e9t\u00e9", "stray"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		err := parseFlags(testFlagSet(), args, io.Discard)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			return
		}
		var ue usageError
		if !errors.As(err, &ue) {
			t.Fatalf("parseFlags(%q) = %v, want a usageError", args, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "flag provided") || strings.Contains(msg, "for flag -") {
			t.Errorf("parseFlags(%q) kept the flag package's words: %q", args, msg)
		}
		if strings.ContainsAny(msg, "\n\r") {
			t.Errorf("parseFlags(%q) = %q, not one line", args, msg)
		}
		_ = jsonAsked(testFlagSet(), args)
	})
}

// FuzzCallError feeds what a node might answer to callError: it never
// panics, and the message is one line that carries none of gRPC's
// wrapping.
func FuzzCallError(f *testing.F) {
	f.Add(uint32(codes.Unavailable), `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)
	f.Add(uint32(codes.Unavailable), `connection error: desc = "unterminated`)
	f.Add(uint32(codes.NotFound), "unknown rule \"a\nb\"")
	f.Add(uint32(codes.DeadlineExceeded), "context deadline exceeded")
	f.Add(uint32(99), "\x00\xff")
	f.Fuzz(func(t *testing.T, code uint32, msg string) {
		err := callError("127.0.0.1:7070", "the check", time.Second, status.Error(codes.Code(code), msg))
		got := err.Error()
		if strings.ContainsAny(got, "\n\r") {
			t.Errorf("message %q is not one line", got)
		}
		if strings.Contains(got, "rpc error: code =") {
			t.Errorf("message %q carries gRPC's wrapping", got)
		}
		if errorCode(err) == "" {
			t.Errorf("no code for %q", got)
		}
	})
}

// FuzzSuggest checks the edit distance on any two words: symmetric, zero
// only for equal words, at most the longer word's length; and a suggestion
// is always a candidate other than the word.
func FuzzSuggest(f *testing.F) {
	f.Add("chek", "check")
	f.Add("", "x")
	f.Add("naïve", "naive")
	f.Add("\xff", "a")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := editDistance(a, b)
		if d != editDistance(b, a) {
			t.Errorf("editDistance(%q, %q) = %d, not symmetric", a, b, d)
		}
		if (d == 0) != (string([]rune(a)) == string([]rune(b))) {
			t.Errorf("editDistance(%q, %q) = %d", a, b, d)
		}
		if d > max(utf8.RuneCountInString(a), utf8.RuneCountInString(b)) {
			t.Errorf("editDistance(%q, %q) = %d, over the longer length", a, b, d)
		}
		if s, ok := suggest(a, []string{b, "check"}); ok && (s == a || (s != b && s != "check")) {
			t.Errorf("suggest(%q) = %q", a, s)
		}
	})
}
