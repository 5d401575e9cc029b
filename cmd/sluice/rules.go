package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

const rulesUsage = `usage: sluice rules [--addr HOST:PORT] [--timeout DURATION] [--json]
                    [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME]

Asks the node at --addr (its gRPC address) for the rules it enforces, with
their defaults filled in, and prints them sorted by name, under a line
naming the node and its rules hash:

  node node-a at 127.0.0.1:7070, rules hash 3f1c0a9e5b7d2c41

  NAME   COUNT  TIME_WINDOW  WINDOW_TYPE  SYNC_INTERVAL  ALLOCATION  FAIL_MODE
  api    1000   10s          sliding      200ms          owner       -
  login  5      1m           fixed        strict         -           closed

The columns are the rule file's fields. A strict rule shows strict for its
sync interval and no allocation; a batched rule shows no fail mode (neither
applies). The rules hash is the one the node gossips and 'sluice members'
compares: nodes with the same hash enforce the same rules. --json prints
one JSON object: {"addr", "node", "rules_hash", "rules": [{"name", "count",
"time_window", "window_type", "sync_interval", "strict", "allocation",
"fail_mode"}]} with durations in seconds (sync_interval -1 for a strict
rule, as in the rule file) and rules_hash as 16 hex digits. With --json an
error is one JSON object on stdout too: {"error": "…", "code": "unavailable"}.

A node that serves TLS is called with --tls-ca (and --tls-cert and
--tls-key where it requires client certificates), as 'sluice check' does.

Exit status: 0 success, 2 error (bad flags, node unreachable).

flags:
`

// runRules lists the rules a node enforces: `sluice rules --addr HOST:PORT`.
func runRules(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("rules", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), rulesUsage)
		printFlags(fs)
	}
	addr := fs.String("addr", defaultGRPCAddr, "gRPC address of the node to ask, `HOST:PORT`")
	tf := addTLSFlags(fs)
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	asJSON := fs.Bool("json", false, "print the rules, or the error, as one JSON object")
	if err := parseFlags(fs, args, stdout); err != nil {
		return jsonErrors(jsonAsked(fs, args), err)
	}
	defer func() { err = jsonErrors(*asJSON, err) }()
	switch {
	case *addr == "":
		return usageError{errors.New("--addr must not be empty")}
	case *timeout <= 0:
		return usageError{fmt.Errorf("--timeout must be positive, got %v", *timeout)}
	}

	conn, err := dialNode(*addr, tf)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := sluicev1.NewLimiterClient(conn).Rules(ctx, &sluicev1.RulesRequest{})
	if err != nil {
		return callError(*addr, "the rule list", *timeout, err)
	}
	out := rulesFromProto(*addr, resp)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(out.toJSON())
	}
	return writeRulesTable(stdout, out)
}

// nodeRules is a node's answer to Rules, its rules sorted by name.
type nodeRules struct {
	addr, node string
	hash       uint64
	rules      []nodeRule
}

// nodeRule is one rule as a node reported it.
type nodeRule struct {
	name, windowType, allocation, failMode string
	count                                  int64
	window, syncInterval                   time.Duration
	strict, shadow                         bool
	limits                                 []ruleLimit
}

// ruleLimit is one further limit of a rule.
type ruleLimit struct {
	Count      int64   `json:"count"`
	TimeWindow float64 `json:"time_window"` // seconds
	WindowType string  `json:"window_type"`
}

// rulesFromProto reads the answer of the node at addr.
func rulesFromProto(addr string, resp *sluicev1.RulesResponse) nodeRules {
	out := nodeRules{addr: addr, node: resp.GetNode(), hash: resp.GetRulesHash(),
		rules: make([]nodeRule, 0, len(resp.GetRules()))}
	for _, r := range resp.GetRules() {
		out.rules = append(out.rules, nodeRule{
			name: r.GetName(), windowType: r.GetWindowType(), allocation: r.GetAllocation(), failMode: r.GetFailMode(),
			count: r.GetCount(), window: r.GetWindow().AsDuration(), syncInterval: r.GetSyncInterval().AsDuration(),
			strict: r.GetStrict(), shadow: r.GetShadow(),
		})
		for _, l := range r.GetLimits() {
			last := &out.rules[len(out.rules)-1]
			last.limits = append(last.limits, ruleLimit{Count: l.GetCount(), TimeWindow: l.GetWindow().AsDuration().Seconds(),
				WindowType: l.GetWindowType()})
		}
	}
	slices.SortStableFunc(out.rules, func(a, b nodeRule) int { return cmp.Compare(a.name, b.name) })
	return out
}

// rulesJSON is what `sluice rules --json` prints. RulesHash is 16 hex
// digits, as in `sluice members --json`: a 64-bit number does not survive
// every JSON reader.
type rulesJSON struct {
	// Addr is the node that answered.
	Addr      string     `json:"addr"`
	Node      string     `json:"node"`
	RulesHash string     `json:"rules_hash"`
	Rules     []ruleJSON `json:"rules"`
}

// ruleJSON is one rule in `sluice rules --json`, its fields named as in the
// rule file.
type ruleJSON struct {
	Name       string  `json:"name"`
	Count      int64   `json:"count"`
	TimeWindow float64 `json:"time_window"` // seconds
	WindowType string  `json:"window_type"`
	// SyncInterval is in seconds; -1 for a strict rule, as in the file.
	SyncInterval float64 `json:"sync_interval"`
	Strict       bool    `json:"strict"`
	Allocation   string  `json:"allocation"`
	FailMode     string  `json:"fail_mode"`
	// Limits are the rule's further limits, as under limits: in the file.
	Limits []ruleLimit `json:"limits,omitempty"`
	Shadow bool        `json:"shadow,omitempty"`
}

// toJSON is rs as `sluice rules --json` prints it.
func (rs nodeRules) toJSON() rulesJSON {
	out := rulesJSON{Addr: rs.addr, Node: rs.node, RulesHash: fmt.Sprintf("%016x", rs.hash),
		Rules: make([]ruleJSON, 0, len(rs.rules))}
	for _, r := range rs.rules {
		sync := r.syncInterval.Seconds()
		if r.strict {
			sync = -1
		}
		out.Rules = append(out.Rules, ruleJSON{Name: r.name, Count: r.count, TimeWindow: r.window.Seconds(),
			WindowType: r.windowType, SyncInterval: sync, Strict: r.strict, Allocation: r.allocation, FailMode: r.failMode,
			Limits: r.limits, Shadow: r.shadow})
	}
	return out
}

// writeRulesTable prints the node's line and its rules as an aligned table.
func writeRulesTable(w io.Writer, rs nodeRules) error {
	fmt.Fprintf(w, "node %s at %s, rules hash %016x\n\n", orDash(rs.node), orDash(rs.addr), rs.hash)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCOUNT\tTIME_WINDOW\tWINDOW_TYPE\tSYNC_INTERVAL\tALLOCATION\tFAIL_MODE\tSHADOW")
	for _, r := range rs.rules {
		sync, alloc, failMode := shortDuration(r.syncInterval), orDash(r.allocation), "-"
		if r.strict {
			sync, alloc, failMode = "strict", "-", orDash(r.failMode)
		}
		shadow := "-"
		if r.shadow {
			shadow = "yes"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(r.name), r.count, shortDuration(r.window),
			orDash(r.windowType), sync, alloc, failMode, shadow)
		for _, l := range r.limits {
			// A further limit, on a line of its own under its rule.
			fmt.Fprintf(tw, "  + limit\t%d\t%s\t%s\n", l.Count,
				shortDuration(time.Duration(l.TimeWindow*float64(time.Second))), orDash(l.WindowType))
		}
	}
	return tw.Flush()
}

// shortDuration writes d as a Go duration without its zero tails: 1m
// rather than 1m0s, 1h rather than 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
