package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

const checkUsage = `usage: sluice check [--addr HOST:PORT] --rule RULE --key KEY [--hits N] [--timeout DURATION] [--json]
                    [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME]

Asks a sluice node whether N hits of KEY fit under RULE, spends them if they
do, and prints the decision on one line:

  allowed  limit=10 remaining=9 reset_after=10s retry_after=0s path=local
  REFUSED  limit=10 remaining=0 reset_after=9.2s retry_after=1.3s path=local

Durations are rounded up to the millisecond, so retrying after retry_after
is never early. --hits 0 shows the state without spending. --json prints
one JSON object with durations in seconds.

Errors are one line on stderr, e.g.

  sluice check: cannot reach 127.0.0.1:7070: connection refused — is the agent running?
  sluice check: unknown rule "apii"; did you mean "api"?

With --json an error is one JSON object on stdout instead:
{"error": "…", "code": "unavailable"} (code: usage, unavailable,
deadline_exceeded, not_found, invalid_argument, …).

A node that serves TLS (its config file's tls:) is called with --tls-ca,
the CA of its certificate; one that requires client certificates, with
--tls-cert and --tls-key as well. The node's certificate must name the
host of --addr, or --tls-server-name.

Exit status: 0 allowed, 1 refused, 2 error (bad flags, unknown rule, bad
key or hits, node unreachable).

flags:
`

// runCheck runs `sluice check`.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkUsage)
		printFlags(fs)
	}
	addr := fs.String("addr", defaultGRPCAddr, "gRPC address of the node, `HOST:PORT`")
	tf := addTLSFlags(fs)
	rule := fs.String("rule", "", "`RULE` to check against (required)")
	key := fs.String("key", "", "`KEY` to check, e.g. user:42 (required)")
	hits := fs.Int64("hits", 1, "cost of the request; 0 asks without spending")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	asJSON := fs.Bool("json", false, "print the decision, or the error, as one JSON object")
	if err := parseFlags(fs, args, stdout); err != nil {
		return jsonErrors(jsonAsked(fs, args), err)
	}
	defer func() { err = jsonErrors(*asJSON, err) }()
	switch {
	case *rule == "":
		return usageError{errors.New("--rule is required")}
	case *key == "":
		return usageError{errors.New("--key is required")}
	case *timeout <= 0:
		return usageError{fmt.Errorf("--timeout must be positive, got %v", *timeout)}
	}
	for _, f := range []struct{ flag, value string }{{"--rule", *rule}, {"--key", *key}} {
		if err := notUTF8(f.flag, f.value); err != nil {
			return err
		}
	}

	conn, err := dialNode(*addr, tf)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client := sluicev1.NewLimiterClient(conn)
	resp, err := client.Check(ctx, &sluicev1.CheckRequest{Rule: *rule, Key: *key, Hits: *hits})
	if err != nil {
		err = callError(*addr, "the check", *timeout, err)
		if isNotFound(err) {
			err = fmt.Errorf("%w%s", err, ruleHint(ctx, client, *rule))
		}
		return err
	}

	if *asJSON {
		err = json.NewEncoder(stdout).Encode(checkJSON{
			Rule: *rule, Key: *key, Hits: *hits,
			Allowed: resp.GetAllowed(), Limit: resp.GetLimit(), Remaining: resp.GetRemaining(),
			ResetAfter: resp.GetResetAfter().AsDuration().Seconds(),
			RetryAfter: resp.GetRetryAfter().AsDuration().Seconds(),
			Path:       resp.GetPath(),
			Shadowed:   resp.GetShadowed(),
		})
	} else {
		_, err = fmt.Fprintln(stdout, formatDecision(resp))
	}
	if err != nil {
		return err
	}
	if !resp.GetAllowed() {
		return exitStatus(1)
	}
	return nil
}

// notUTF8 is the usage error for a flag's value that is not valid UTF-8,
// naming its first byte that is not, else nil. A check's rule and key are
// protobuf strings, which must be UTF-8: the client could not send it, and
// a node refuses it.
func notUTF8(flag, value string) error {
	for i := 0; i < len(value); {
		r, size := utf8.DecodeRuneInString(value[i:])
		if r == utf8.RuneError && size == 1 {
			return usageError{fmt.Errorf("%s must be valid UTF-8, got byte 0x%02X at offset %d", flag, value[i], i)}
		}
		i += size
	}
	return nil
}

// ruleHint is what to add to "unknown rule": the rule the node has that
// rule mistypes, else the rules it has. It asks the node, and says nothing
// if the node does not answer (an older node has no Rules).
func ruleHint(ctx context.Context, client sluicev1.LimiterClient, rule string) string {
	resp, err := client.Rules(ctx, &sluicev1.RulesRequest{})
	if err != nil || len(resp.GetRules()) == 0 {
		return ""
	}
	names := make([]string, 0, len(resp.GetRules()))
	for _, r := range resp.GetRules() {
		// Names come from the network: orDash quotes an odd one.
		names = append(names, orDash(r.GetName()))
	}
	if s, ok := suggest(rule, names); ok {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	slices.Sort(names)
	const most = 10
	if len(names) > most {
		return fmt.Sprintf("; the node has %d rules (sluice rules lists them)", len(names))
	}
	return "; the node has " + strings.Join(names, ", ")
}

// checkJSON is what `sluice check --json` prints.
type checkJSON struct {
	Rule       string  `json:"rule"`
	Key        string  `json:"key"`
	Hits       int64   `json:"hits"`
	Allowed    bool    `json:"allowed"`
	Limit      int64   `json:"limit"`
	Remaining  int64   `json:"remaining"`
	ResetAfter float64 `json:"reset_after"` // seconds
	RetryAfter float64 `json:"retry_after"` // seconds
	Path       string  `json:"path"`
	// Shadowed: a rule in shadow mode refused the hits and admitted the
	// caller all the same.
	Shadowed bool `json:"shadowed"`
}

// formatDecision renders a decision on one line.
func formatDecision(r *sluicev1.CheckResponse) string {
	verdict := "allowed "
	if !r.GetAllowed() {
		verdict = "REFUSED "
	}
	line := fmt.Sprintf("%s limit=%d remaining=%d reset_after=%v retry_after=%v path=%s", verdict,
		r.GetLimit(), r.GetRemaining(),
		ceilMillis(r.GetResetAfter().AsDuration()), ceilMillis(r.GetRetryAfter().AsDuration()), r.GetPath())
	if r.GetShadowed() {
		// The wait is the one the refusal would have given.
		line += " shadow=refused"
	}
	return line
}

// ceilMillis rounds d up to the millisecond.
func ceilMillis(d time.Duration) time.Duration {
	switch {
	case d <= 0:
		return 0
	case d > math.MaxInt64-time.Millisecond:
		return d
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
