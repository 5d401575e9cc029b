package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

const checkUsage = `usage: sluice check [--addr HOST:PORT] --rule RULE --key KEY [--hits N] [--json]

Asks a sluice node whether N hits of KEY fit under RULE, spends them if they
do, and prints the decision on one line:

  allowed  limit=10 remaining=9 reset_after=10s retry_after=0s
  REFUSED  limit=10 remaining=0 reset_after=9.2s retry_after=1.3s

Durations are rounded up to the millisecond, so retrying after retry_after
is never early. --hits 0 shows the state without spending. --json prints
one JSON object with durations in seconds.

Exit status: 0 allowed, 1 refused, 2 error (bad flags, unknown rule, bad
key or hits, node unreachable).

flags:
`

// runCheck runs `sluice check`.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkUsage)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", defaultGRPCAddr, "gRPC address of the node, `HOST:PORT`")
	rule := fs.String("rule", "", "`RULE` to check against (required)")
	key := fs.String("key", "", "`KEY` to check, e.g. user:42 (required)")
	hits := fs.Int64("hits", 1, "cost of the request; 0 asks without spending")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *rule == "":
		return usageError{errors.New("--rule is required")}
	case *key == "":
		return usageError{errors.New("--key is required")}
	case *timeout <= 0:
		return usageError{fmt.Errorf("--timeout must be positive, got %v", *timeout)}
	}

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("--addr %q: %w", *addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := sluicev1.NewLimiterClient(conn).Check(ctx, &sluicev1.CheckRequest{Rule: *rule, Key: *key, Hits: *hits})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return fmt.Errorf("%s: %s: %s", *addr, st.Code(), st.Message())
		}
		return fmt.Errorf("%s: %w", *addr, err)
	}

	if *asJSON {
		err = json.NewEncoder(stdout).Encode(checkJSON{
			Rule: *rule, Key: *key, Hits: *hits,
			Allowed: resp.GetAllowed(), Limit: resp.GetLimit(), Remaining: resp.GetRemaining(),
			ResetAfter: resp.GetResetAfter().AsDuration().Seconds(),
			RetryAfter: resp.GetRetryAfter().AsDuration().Seconds(),
			Path:       resp.GetPath(),
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
}

// formatDecision renders a decision on one line.
func formatDecision(r *sluicev1.CheckResponse) string {
	verdict := "allowed "
	if !r.GetAllowed() {
		verdict = "REFUSED "
	}
	return fmt.Sprintf("%s limit=%d remaining=%d reset_after=%v retry_after=%v path=%s", verdict,
		r.GetLimit(), r.GetRemaining(),
		ceilMillis(r.GetResetAfter().AsDuration()), ceilMillis(r.GetRetryAfter().AsDuration()), r.GetPath())
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
