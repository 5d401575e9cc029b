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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

const membersUsage = `usage: sluice members [--addr HOST:PORT] [--timeout DURATION] [--json]
                      [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME]

Asks the node at --addr (its gRPC address) for the cluster as it sees it
and prints one member per line, sorted by name:

     NAME    STATE    GRPC            GOSSIP          BOOT              RULES
  *  node-a  alive    127.0.0.1:7070  127.0.0.1:7946  3f1c0a9e5b7d2c41  match
     node-b  alive    127.0.0.1:7071  127.0.0.1:7947  9a0e4d7c1b2f3e65  match
     node-c  suspect  127.0.0.1:7072  127.0.0.1:7948  51d2a7e09c3b8f14  DIFFERENT

* marks the node that answered. STATE is alive; suspect while gossip
lists the member but it did not answer this node's ping just now; failed
once gossip declared it dead and this node retries it (every 5 s, for
24 h, until it is back). BOOT identifies the member's current run; it
changes on every restart. RULES is match when the member's rules are the
answering node's, DIFFERENT when they are not (a config drift to fix;
'sluice rules' shows each node's rules). A node that does not gossip
('sluice agent' without --gossip-addr) lists itself alone. --json prints
one JSON object: {"addr": …, "members": [{"name", "state", "grpc_addr",
"gossip_addr", "boot", "rules_hash", "rules_match", "self"}]} with boot
and rules_hash as 16 hex digits. With --json an error is one JSON object
on stdout too: {"error": "…", "code": "unavailable"}.

A node that serves TLS is called with --tls-ca (and --tls-cert and
--tls-key where it requires client certificates), as 'sluice check' does.

Exit status: 0 success, 2 error (bad flags, node unreachable).

flags:
`

// runMembers lists the members of a node's cluster: `sluice members --addr HOST:PORT`.
func runMembers(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("members", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), membersUsage)
		printFlags(fs)
	}
	addr := fs.String("addr", defaultGRPCAddr, "gRPC address of the node to ask, `HOST:PORT`")
	tf := addTLSFlags(fs)
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	asJSON := fs.Bool("json", false, "print the members, or the error, as one JSON object")
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
	resp, err := sluicev1.NewPeerClient(conn).Members(ctx, &sluicev1.MembersRequest{})
	if err != nil {
		return callError(*addr, "the member list", *timeout, err)
	}
	members := membersFromProto(resp.GetMembers())
	if *asJSON {
		return json.NewEncoder(stdout).Encode(membersJSON{Addr: *addr, Members: members})
	}
	return writeMembersTable(stdout, members)
}

// membersJSON is what `sluice members --json` prints.
type membersJSON struct {
	// Addr is the node that answered.
	Addr    string       `json:"addr"`
	Members []memberJSON `json:"members"`
}

// memberJSON is one member in `sluice members --json`. Boot and RulesHash
// are 16 hex digits: a 64-bit number does not survive every JSON reader.
type memberJSON struct {
	Name       string `json:"name"`
	State      string `json:"state"`
	GRPCAddr   string `json:"grpc_addr"`
	GossipAddr string `json:"gossip_addr"`
	Boot       string `json:"boot"`
	RulesHash  string `json:"rules_hash"`
	RulesMatch bool   `json:"rules_match"`
	Self       bool   `json:"self"`
}

// membersFromProto converts the answer, sorted by name (then by gossip
// address, should two members share a name).
func membersFromProto(in []*sluicev1.Member) []memberJSON {
	out := make([]memberJSON, 0, len(in))
	for _, m := range in {
		out = append(out, memberJSON{
			Name: m.GetName(), State: m.GetState(), GRPCAddr: m.GetGrpcAddr(), GossipAddr: m.GetGossipAddr(),
			Boot: fmt.Sprintf("%016x", m.GetBoot()), RulesHash: fmt.Sprintf("%016x", m.GetRulesHash()),
			RulesMatch: m.GetRulesMatch(), Self: m.GetSelf(),
		})
	}
	slices.SortStableFunc(out, func(a, b memberJSON) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.GossipAddr, b.GossipAddr))
	})
	return out
}

// writeMembersTable prints the members as an aligned table.
func writeMembersTable(w io.Writer, members []memberJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, " \tNAME\tSTATE\tGRPC\tGOSSIP\tBOOT\tRULES")
	for _, m := range members {
		self, rules := " ", "match"
		if m.Self {
			self = "*"
		}
		if !m.RulesMatch {
			rules = "DIFFERENT"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", self, orDash(m.Name), orDash(m.State),
			orDash(m.GRPCAddr), orDash(m.GossipAddr), m.Boot, rules)
	}
	return tw.Flush()
}

// orDash is s as a table cell: "-" when empty, quoted when it holds spaces
// or control characters (names come from the network).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
