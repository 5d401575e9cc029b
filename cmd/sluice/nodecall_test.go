package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

func TestCallError(t *testing.T) {
	const addr = "127.0.0.1:7070"
	tests := []struct {
		name     string
		err      error
		wantMsg  string
		wantCode string
	}{
		{"connection refused", status.Error(codes.Unavailable,
			`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7070: connect: connection refused"`),
			"cannot reach 127.0.0.1:7070: connection refused — is the agent running?", "unavailable"},
		{"no such host", status.Error(codes.Unavailable,
			`connection error: desc = "transport: Error while dialing: dial tcp: lookup nohost.example on 127.0.0.53:53: no such host"`),
			"cannot reach 127.0.0.1:7070: no such host", "unavailable"},
		{"no route", status.Error(codes.Unavailable,
			`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7070: connect: no route to host"`),
			"cannot reach 127.0.0.1:7070: no route to host", "unavailable"},
		{"not gRPC", status.Error(codes.Unavailable,
			`connection error: desc = "error reading server preface: http2: frame too large"`),
			"cannot reach 127.0.0.1:7070: it does not speak gRPC (error reading server preface: http2: frame too large); " +
				"is this the agent's --grpc-addr?", "unavailable"},
		{"HTTP server", status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: http2: `+
			`failed reading the frame payload: http2: frame too large, note that the frame header looked like an HTTP/1.1 header"`),
			"cannot reach 127.0.0.1:7070: it answers HTTP/1.1, not gRPC; is this the agent's --http-addr rather than its --grpc-addr?",
			"unavailable"},
		{"TLS to plaintext", status.Error(codes.Unavailable,
			`connection error: desc = "transport: authentication handshake failed: tls: first record does not look like a TLS handshake"`),
			"cannot reach 127.0.0.1:7070: it serves plaintext, not TLS: call it without --tls-ca, --tls-cert and --tls-key", "unavailable"},
		{"plaintext to TLS", status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: EOF"`),
			"cannot reach 127.0.0.1:7070: it closed the connection before speaking gRPC: does the node serve TLS? call it with --tls-ca", "unavailable"},
		{"plaintext to TLS, reset", status.Error(codes.Unavailable,
			`connection error: desc = "error reading server preface: read tcp 127.0.0.1:53984->127.0.0.1:7070: read: connection reset by peer"`),
			"cannot reach 127.0.0.1:7070: it closed the connection before speaking gRPC: does the node serve TLS? call it with --tls-ca", "unavailable"},
		{"client certificate required", status.Error(codes.Unavailable,
			`connection error: desc = "transport: authentication handshake failed: remote error: tls: certificate required"`),
			"cannot reach 127.0.0.1:7070: the node requires a client certificate: call it with --tls-cert and --tls-key", "unavailable"},
		{"client certificate refused", status.Error(codes.Unavailable,
			`connection error: desc = "transport: authentication handshake failed: remote error: tls: unknown certificate authority"`),
			"cannot reach 127.0.0.1:7070: the node refused the client certificate of --tls-cert (tls: unknown certificate authority)", "unavailable"},
		{"handshake refused", status.Error(codes.Unavailable,
			`connection error: desc = "transport: authentication handshake failed: remote error: tls: protocol version not supported"`),
			"cannot reach 127.0.0.1:7070: the node refused the TLS handshake (tls: protocol version not supported)", "unavailable"},
		{"node certificate of another CA", status.Error(codes.Unavailable,
			`connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`),
			"cannot reach 127.0.0.1:7070: tls: failed to verify certificate: x509: certificate signed by unknown authority; is --tls-ca the CA of the node's certificate?", "unavailable"},
		{"node certificate for another name", status.Error(codes.Unavailable,
			`connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate is valid for localhost, not 127.0.0.1"`),
			"cannot reach 127.0.0.1:7070: tls: failed to verify certificate: x509: certificate is valid for localhost, not 127.0.0.1; set --tls-server-name to a name it holds", "unavailable"},
		{"node closing", status.Error(codes.Unavailable, "sluice: node is closed"),
			"127.0.0.1:7070 cannot answer the check: node is closed", "unavailable"},
		{"no connection in time", status.Error(codes.DeadlineExceeded,
			"context deadline exceeded while waiting for connections to become ready"),
			"timed out after 2s connecting to 127.0.0.1:7070 (--timeout 2s); is it a sluice node's gRPC address?", "deadline_exceeded"},
		{"no answer in time", status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
			"timed out after 2s waiting for 127.0.0.1:7070 to answer the check (--timeout 2s)", "deadline_exceeded"},
		{"interrupted", status.Error(codes.Canceled, "context canceled"),
			"interrupted while waiting for 127.0.0.1:7070 to answer the check", "canceled"},
		{"unknown rule", status.Error(codes.NotFound, `unknown rule "nope"`), `unknown rule "nope"`, "not_found"},
		{"bad key", status.Error(codes.InvalidArgument, "key must not be empty"), "key must not be empty", "invalid_argument"},
		{"outcome unknown", status.Error(codes.Aborted, "sluice: strict check outcome unknown"),
			"strict check outcome unknown: the node may or may not have spent it", "aborted"},
		{"older node", status.Error(codes.Unimplemented, "unknown method Rules for service sluice.v1.Limiter"),
			"127.0.0.1:7070 does not answer the check: it runs an older sluice, or is not a sluice node", "unimplemented"},
		{"internal", status.Error(codes.Internal, "boom"), "127.0.0.1:7070 failed the check: internal: boom", "internal"},
		{"resource exhausted", status.Error(codes.ResourceExhausted, "too big"),
			"127.0.0.1:7070 failed the check: resource exhausted: too big", "resource_exhausted"},
		{"not a status", errors.New("broken pipe"), "127.0.0.1:7070: broken pipe", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := callError(addr, "the check", 2*time.Second, tt.err)
			if err.Error() != tt.wantMsg {
				t.Errorf("message\n got %q\nwant %q", err.Error(), tt.wantMsg)
			}
			if got := errorCode(err); got != tt.wantCode {
				t.Errorf("code %q, want %q", got, tt.wantCode)
			}
			if strings.Contains(err.Error(), "rpc error") || strings.Contains(err.Error(), "desc =") {
				t.Errorf("message %q carries gRPC's wrapping", err.Error())
			}
		})
	}
}

func TestCodeName(t *testing.T) {
	tests := []struct {
		in   codes.Code
		want string
	}{
		{codes.OK, "ok"}, {codes.NotFound, "not_found"}, {codes.DeadlineExceeded, "deadline_exceeded"},
		{codes.Unavailable, "unavailable"}, {codes.FailedPrecondition, "failed_precondition"},
		{codes.Unauthenticated, "unauthenticated"},
	}
	for _, tt := range tests {
		if got := codeName(tt.in); got != tt.want {
			t.Errorf("codeName(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// silentListener accepts TCP connections and never speaks: a gRPC client
// connects and waits for a handshake that does not come. It stops when the
// test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// stuckNode is a gRPC server whose Check and Members wait for the caller to
// give up, and which has no Rules, as a node of an older sluice.
type stuckNode struct {
	sluicev1.UnimplementedLimiterServer
	sluicev1.UnimplementedPeerServer
}

func (stuckNode) Check(ctx context.Context, _ *sluicev1.CheckRequest) (*sluicev1.CheckResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (stuckNode) Members(ctx context.Context, _ *sluicev1.MembersRequest) (*sluicev1.MembersResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// startStuckNode serves a stuckNode on a loopback port until the test ends.
func startStuckNode(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sluicev1.RegisterLimiterServer(srv, stuckNode{})
	sluicev1.RegisterPeerServer(srv, stuckNode{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// TestNodeErrors runs every command that asks a node against nodes that
// fail in each way, as text and as JSON: one line on stderr, or one JSON
// object on stdout, and exit 2 either way.
func TestNodeErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	silent := silentListener(t)
	stuck := startStuckNode(t)
	agent := startTestAgent(t, agentTestConfig, agentTestEpoch)
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	webAddr := web.Listener.Addr().String()

	check := []string{"check", "--rule", "fixed", "--key", "k"}
	tests := []struct {
		name     string
		args     []string
		wantMsg  string
		wantCode string
	}{
		{"check refused", append(check, "--addr", closed),
			"cannot reach " + closed + ": connection refused — is the agent running?", "unavailable"},
		{"members refused", []string{"members", "--addr", closed},
			"cannot reach " + closed + ": connection refused — is the agent running?", "unavailable"},
		{"rules refused", []string{"rules", "--addr", closed},
			"cannot reach " + closed + ": connection refused — is the agent running?", "unavailable"},
		{"check no handshake", append(check, "--addr", silent, "--timeout", "200ms"),
			"timed out after 200ms connecting to " + silent + " (--timeout 200ms); is it a sluice node's gRPC address?", "deadline_exceeded"},
		{"members no handshake", []string{"members", "--addr", silent, "--timeout", "200ms"},
			"timed out after 200ms connecting to " + silent + " (--timeout 200ms); is it a sluice node's gRPC address?", "deadline_exceeded"},
		{"rules no handshake", []string{"rules", "--addr", silent, "--timeout", "200ms"},
			"timed out after 200ms connecting to " + silent + " (--timeout 200ms); is it a sluice node's gRPC address?", "deadline_exceeded"},
		{"check no answer", append(check, "--addr", stuck, "--timeout", "200ms"),
			"timed out after 200ms waiting for " + stuck + " to answer the check (--timeout 200ms)", "deadline_exceeded"},
		{"members no answer", []string{"members", "--addr", stuck, "--timeout", "200ms"},
			"timed out after 200ms waiting for " + stuck + " to answer the member list (--timeout 200ms)", "deadline_exceeded"},
		{"check an HTTP server", append(check, "--addr", webAddr),
			"cannot reach " + webAddr + ": it answers HTTP/1.1, not gRPC; is this the agent's --http-addr rather than its --grpc-addr?",
			"unavailable"},
		{"rules from an older node", []string{"rules", "--addr", stuck},
			stuck + " does not answer the rule list: it runs an older sluice, or is not a sluice node", "unimplemented"},
		{"unknown rule", []string{"check", "--addr", agent, "--rule", "nope", "--key", "k"},
			`unknown rule "nope"; the node has fixed, sliding`, "not_found"},
		{"bad key", []string{"check", "--addr", agent, "--rule", "fixed", "--key", ""},
			"--key is required", "usage"},
		{"hits over count", []string{"check", "--addr", agent, "--rule", "fixed", "--key", "k", "--hits", "9"},
			`hits exceed the rule's count and can never be admitted: hits 9, rule "fixed" count 3`, "invalid_argument"},
		{"addr without port", []string{"rules", "--addr", "127.0.0.1"},
			`--addr must be HOST:PORT, got "127.0.0.1": address 127.0.0.1: missing port in address`, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), tt.args...)
			if code != 2 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, stdout)
			}
			want := "sluice " + tt.args[0] + ": " + tt.wantMsg + "\n"
			if tt.wantCode == "usage" {
				want += "run 'sluice " + tt.args[0] + " --help' for usage\n"
			}
			if stderr != want {
				t.Errorf("stderr\n got %q\nwant %q", stderr, want)
			}
		})
		t.Run(tt.name+" json", func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), append(tt.args, "--json")...)
			if code != 2 || stderr != "" {
				t.Errorf("exit %d, stderr %q; want 2 and nothing", code, stderr)
			}
			if strings.Count(stdout, "\n") != 1 {
				t.Errorf("stdout %q, want one line", stdout)
			}
			var got errorJSON
			dec := json.NewDecoder(strings.NewReader(stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("stdout %q: %v", stdout, err)
			}
			if want := (errorJSON{Error: tt.wantMsg, Code: tt.wantCode}); got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestJSONUsageErrors: a mistake on the command line of a command run with
// --json is a JSON object too, wherever --json stands; --json=false keeps
// text, and -h is help, not an error.
func TestJSONUsageErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantJSON string // "" for text on stderr
	}{
		{"json before the mistake", []string{"check", "--json", "--nope"},
			`{"error":"unknown flag --nope","code":"usage"}`},
		{"json after the mistake", []string{"members", "--tiemout", "1s", "--json"},
			`{"error":"unknown flag --tiemout; did you mean --timeout?","code":"usage"}`},
		{"single dash", []string{"rules", "-json", "x"}, `{"error":"unexpected argument \"x\"","code":"usage"}`},
		{"json=true", []string{"rules", "--json=true", "--timeout", "never"},
			`{"error":"invalid value \"never\" for --timeout: want a duration such as 2s or 500ms","code":"usage"}`},
		{"missing rule", []string{"check", "--key", "k", "--json"}, `{"error":"--rule is required","code":"usage"}`},
		{"key not UTF-8", []string{"check", "--rule", "api", "--key", "\xff", "--json"},
			`{"error":"--key must be valid UTF-8, got byte 0xFF at offset 0","code":"usage"}`},
		{"json=false", []string{"check", "--json=false", "--nope"}, ""},
		{"after --", []string{"check", "--nope", "--", "--json"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if tt.wantJSON == "" {
				if stdout != "" || !strings.HasPrefix(stderr, "sluice check: unknown flag --nope\n") {
					t.Errorf("stdout %q, stderr %q; want text on stderr", stdout, stderr)
				}
				return
			}
			if stdout != tt.wantJSON+"\n" || stderr != "" {
				t.Errorf("stdout %q, stderr %q; want %s on stdout", stdout, stderr, tt.wantJSON)
			}
		})
	}
	code, stdout, stderr := runCmd(context.Background(), "check", "--json", "-h")
	if code != 0 || !strings.HasPrefix(stdout, "usage: sluice check") || stderr != "" {
		t.Errorf("check --json -h: exit %d, stdout %q, stderr %q; want the usage", code, stdout, stderr)
	}
}
