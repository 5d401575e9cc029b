package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster"
)

// dialNode returns a client connection to the node at addr, which must be
// HOST:PORT (a usage error if not), over TLS when tf says so. It dials addr
// as given rather than through gRPC's DNS resolver, so that a failed lookup
// or connect comes back with its cause ("no such host", "connection
// refused") instead of the resolver's "produced zero addresses".
func dialNode(addr string, tf *tlsFlags) (*grpc.ClientConn, error) {
	if err := cluster.CheckHostPort("--addr", addr); err != nil {
		return nil, usageError{err}
	}
	creds, err := tf.credentials(addr)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, usageError{fmt.Errorf("--addr %q: %w", addr, err)}
	}
	return conn, nil
}

// nodeError is a call to a node that failed, said in words a person can act
// on, without gRPC's "rpc error: code = … desc = …".
type nodeError struct {
	// code is the gRPC status code in snake case, for --json.
	code string
	msg  string
}

func (e *nodeError) Error() string { return e.msg }

// callError turns the error of a call to the node at addr into a nodeError.
// what names what was asked ("the check"), and timeout is the --timeout the
// call ran under. A node's own refusals (unknown rule, bad key) are its
// message alone; failures to reach it say so and suggest what to look at.
func callError(addr, what string, timeout time.Duration, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return &nodeError{code: "error", msg: fmt.Sprintf("%s: %s", addr, oneLine(err.Error()))}
	}
	// The message comes from the network: an error stays one line.
	code, msg := codeName(st.Code()), oneLine(st.Message())
	fail := func(format string, args ...any) error {
		return &nodeError{code: code, msg: fmt.Sprintf(format, args...)}
	}
	switch st.Code() {
	case codes.Unavailable:
		if desc, ok := strings.CutPrefix(msg, "connection error: desc = "); ok {
			// Unquoted, the cause may hold line breaks its quoting escaped.
			return fail("cannot reach %s: %s", addr, oneLine(dialCause(desc)))
		}
		return fail("%s cannot answer %s: %s", addr, what, strings.TrimPrefix(msg, "sluice: "))
	case codes.DeadlineExceeded:
		if strings.Contains(msg, "waiting for connections to become ready") {
			return fail("timed out after %v connecting to %s (--timeout %v); is it a sluice node's gRPC address?", timeout, addr, timeout)
		}
		return fail("timed out after %v waiting for %s to answer %s (--timeout %v)", timeout, addr, what, timeout)
	case codes.Canceled:
		return fail("interrupted while waiting for %s to answer %s", addr, what)
	case codes.Unimplemented:
		return fail("%s does not answer %s: it runs an older sluice, or is not a sluice node", addr, what)
	case codes.NotFound, codes.InvalidArgument:
		// The node's own words name the rule, field or value.
		return fail("%s", strings.TrimPrefix(msg, "sluice: "))
	case codes.Aborted:
		return fail("%s: the node may or may not have spent it", strings.TrimPrefix(msg, "sluice: "))
	}
	return fail("%s failed %s: %s: %s", addr, what, strings.ReplaceAll(code, "_", " "), msg)
}

// dialCause is why gRPC could not connect, from the desc of its
// "connection error", without the layers of its wrapping.
func dialCause(desc string) string {
	if s, err := strconv.Unquote(desc); err == nil {
		desc = s
	}
	desc = strings.TrimPrefix(desc, "transport: ")
	desc = strings.TrimPrefix(desc, "Error while dialing: ")
	desc = strings.TrimPrefix(desc, "error while dialing: ")
	desc = strings.TrimPrefix(desc, "authentication handshake failed: ")
	desc = dialPrefix.ReplaceAllString(desc, "")
	switch {
	case strings.Contains(desc, "first record does not look like a TLS handshake"):
		return "it serves plaintext, not TLS: call it without --tls-ca, --tls-cert and --tls-key"
	case strings.HasSuffix(desc, "error reading server preface: EOF") || strings.Contains(desc, "connection closed before server preface") ||
		strings.Contains(desc, "error reading server preface") && strings.HasSuffix(desc, "connection reset by peer"):
		// A TLS server drops a plaintext client: as a close, or, when the
		// client's bytes reach it first, as a reset.
		return "it closed the connection before speaking gRPC: does the node serve TLS? call it with --tls-ca"
	case strings.HasSuffix(desc, "remote error: tls: certificate required"):
		return "the node requires a client certificate: call it with --tls-cert and --tls-key"
	case strings.Contains(desc, "remote error: tls: "):
		alert := desc[strings.Index(desc, "remote error: tls: ")+len("remote error: "):]
		if strings.Contains(alert, "certificate") {
			return "the node refused the client certificate of --tls-cert (" + alert + ")"
		}
		return "the node refused the TLS handshake (" + alert + ")"
	case strings.Contains(desc, "certificate signed by unknown authority"):
		return desc + "; is --tls-ca the CA of the node's certificate?"
	case strings.Contains(desc, "x509: certificate is valid for"), strings.Contains(desc, "doesn't contain any IP SANs"):
		return desc + "; set --tls-server-name to a name it holds"
	case strings.HasSuffix(desc, "connection refused"):
		return "connection refused — is the agent running?"
	case strings.HasSuffix(desc, "no such host"):
		return "no such host"
	case strings.Contains(desc, "server preface") && strings.Contains(desc, "HTTP/1.1"):
		return "it answers HTTP/1.1, not gRPC; is this the agent's --http-addr rather than its --grpc-addr?"
	case strings.Contains(desc, "server preface"):
		return "it does not speak gRPC (" + desc + "); is this the agent's --grpc-addr?"
	}
	return desc
}

// dialPrefix is what net.Dial puts in front of its cause: "dial tcp
// 127.0.0.1:7070: connect: ".
var dialPrefix = regexp.MustCompile(`^dial tcp[46]?( \S+)?: (connect: )?`)

// oneLine is s with its control characters escaped as Go does in a quoted
// string ("\n"), so that what a node says cannot break the line.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// codeName is a gRPC code in snake case: NotFound is "not_found".
func codeName(c codes.Code) string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range c.String() {
		if unicode.IsUpper(r) && unicode.IsLower(prev) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
		prev = r
	}
	return b.String()
}

// isNotFound reports whether err is a node's NotFound (an unknown rule).
func isNotFound(err error) bool {
	var ne *nodeError
	return errors.As(err, &ne) && ne.code == "not_found"
}
