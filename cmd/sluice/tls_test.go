package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tlsAgent is an agent with TLS and the files of its CAs.
type tlsAgent struct {
	a                 *agent
	dir               string
	peerCA, clientCA  *testCA
	peerCAFile        string
	clientCAFile      string
	certFile, keyFile string
	config            string
}

// startTLSAgent starts an agent whose config file has a tls section:
// peers of one CA, clients of another; require says whether clients must
// present a certificate.
func startTLSAgent(t *testing.T, require bool) *tlsAgent {
	t.Helper()
	dir := t.TempDir()
	ta := &tlsAgent{dir: dir, peerCA: newTestCA(t, "peer CA"), clientCA: newTestCA(t, "client CA")}
	ta.peerCAFile = ta.peerCA.writeCA(t, dir, "peer-ca.pem")
	ta.clientCAFile = ta.clientCA.writeCA(t, dir, "client-ca.pem")
	ta.certFile, ta.keyFile, _ = ta.peerCA.issue(t, dir, "node")
	ta.config = fmt.Sprintf("tls:\n  cert_file: %s\n  key_file: %s\n  peer_ca_file: %s\n  client_ca_file: %s\n  require_client_cert: %v\n",
		ta.certFile, ta.keyFile, ta.peerCAFile, ta.clientCAFile, require) + agentTestConfig
	path := writeFile(t, "sluice.yaml", ta.config)
	ta.a = startTestAgentArgs(t, nil, "--config", path, "--grpc-addr", "127.0.0.1:0")
	return ta
}

// TestCheckOverTLS: check, members and rules call an agent with TLS with
// its CA; without it, or with another CA, they say what is wrong; with
// client certificates required, a client certificate gets through.
func TestCheckOverTLS(t *testing.T) {
	ta := startTLSAgent(t, false)
	addr := ta.a.GRPCAddr()
	other := newTestCA(t, "other CA")
	otherFile := other.writeCA(t, t.TempDir(), "other.pem")
	clientCert, clientKey, _ := ta.clientCA.issue(t, t.TempDir(), "client")
	junk := writeFile(t, "junk.pem", "junk")
	fifo := filepath.Join(t.TempDir(), "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	ok := []struct {
		name string
		args []string
		want string // a substring of stdout
	}{
		{"check", []string{"check", "--addr", addr, "--tls-ca", ta.peerCAFile, "--rule", "fixed", "--key", "k"}, "allowed  limit=3"},
		{"check by name", []string{"check", "--addr", addr, "--tls-ca", ta.peerCAFile, "--tls-server-name", "localhost", "--rule", "fixed", "--key", "k"}, "allowed  limit=3"},
		{"check with a client certificate", []string{"check", "--addr", addr, "--tls-ca", ta.peerCAFile,
			"--tls-cert", clientCert, "--tls-key", clientKey, "--rule", "fixed", "--key", "k"}, "allowed  limit=3"},
		{"members", []string{"members", "--addr", addr, "--tls-ca", ta.peerCAFile}, "test-node"},
		{"rules", []string{"rules", "--addr", addr, "--tls-ca", ta.peerCAFile}, "sliding"},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(ctx, tt.args...)
			if code != 0 || !strings.Contains(stdout, tt.want) || stderr != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and %q", code, stdout, stderr, tt.want)
			}
		})
	}

	check := []string{"check", "--addr", addr, "--rule", "fixed", "--key", "k", "--hits", "0"}
	bad := []struct {
		name string
		args []string
		want string // a substring of stderr
	}{
		{"plaintext", nil, "cannot reach " + addr + ": it closed the connection before speaking gRPC: does the node serve TLS? call it with --tls-ca"},
		{"another CA", []string{"--tls-ca", otherFile}, "cannot reach " + addr + ": tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"a name the certificate lacks", []string{"--tls-ca", ta.peerCAFile, "--tls-server-name", "sluice.example"},
			"certificate is valid for localhost, not sluice.example; set --tls-server-name to a name it holds"},
		{"certificate without key", []string{"--tls-ca", ta.peerCAFile, "--tls-cert", clientCert},
			"sluice check: --tls-cert and --tls-key go together: the certificate and its key\nrun 'sluice check --help' for usage\n"},
		{"missing CA file", []string{"--tls-ca", filepath.Join(t.TempDir(), "nope.pem")}, "sluice check: --tls-ca: stat "},
		{"CA file not PEM", []string{"--tls-ca", junk}, "sluice check: --tls-ca " + junk + " holds no PEM certificate\n"},
		{"CA file is a named pipe", []string{"--tls-ca", fifo}, "sluice check: --tls-ca " + fifo + ": not a regular file\n"},
		{"key of another certificate", []string{"--tls-cert", clientCert, "--tls-key", ta.keyFile},
			"tls: private key does not match public key"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(ctx, append(append([]string(nil), check...), tt.args...)...)
			if code != 2 || !strings.Contains(stderr, tt.want) || stdout != "" || strings.Count(stderr, "\n") > 2 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, tt.want)
			}
		})
	}
}

// TestCheckClientCertRequired: an agent that requires client certificates
// refuses a client without one, saying so, and admits one with a
// certificate of its client CA.
func TestCheckClientCertRequired(t *testing.T) {
	ta := startTLSAgent(t, true)
	addr := ta.a.GRPCAddr()
	clientCert, clientKey, _ := ta.clientCA.issue(t, t.TempDir(), "client")
	strayCert, strayKey, _ := newTestCA(t, "stray CA").issue(t, t.TempDir(), "stray")
	check := []string{"check", "--addr", addr, "--tls-ca", ta.peerCAFile, "--rule", "fixed", "--key", "k"}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"no certificate", nil, 2, "the node requires a client certificate: call it with --tls-cert and --tls-key"},
		{"a certificate of no CA of the node", []string{"--tls-cert", strayCert, "--tls-key", strayKey}, 2,
			"the node refused the client certificate of --tls-cert (tls: unknown certificate authority)"},
		{"a client CA's certificate", []string{"--tls-cert", clientCert, "--tls-key", clientKey}, 0, "allowed  limit=3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), append(append([]string(nil), check...), tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stdout+stderr, tt.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tt.wantCode, tt.want)
			}
		})
	}
}

// TestAgentReloadsTLS: on SIGHUP the agent reads its certificate files
// again: new connections get the new certificate.
func TestAgentReloadsTLS(t *testing.T) {
	ta := startTLSAgent(t, false)
	served := func() string {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ta.peerCA.pem)
		c, err := tls.Dial("tcp", ta.a.GRPCAddr(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := served()
	_, _, serial := ta.peerCA.issue(t, ta.dir, "node")
	ta.a.reload(context.Background(), "", slog.New(slog.DiscardHandler))
	if got := served(); got != serial || got == before {
		t.Errorf("after SIGHUP the agent serves %s; want the new %s (the old was %s)", got, serial, before)
	}
}

// agentTLSErrors are the agent start errors of bad TLS settings, for
// TestAgentStartErrors: each exits 2 with one line naming the problem.
func agentTLSErrors(t *testing.T) []struct {
	name       string
	args       []string
	wantStderr string
} {
	dir := t.TempDir()
	ca := newTestCA(t, "CA")
	caFile := ca.writeCA(t, dir, "ca.pem")
	cert, key, _ := ca.issue(t, dir, "node")
	_, otherKey, _ := ca.issue(t, dir, "other")
	junk := replaceFile(t, filepath.Join(dir, "junk.pem"), []byte("junk\n"))
	missing := filepath.Join(dir, "missing.pem")
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(cert, key, peerCA string) string {
		return writeFile(t, "tls.yaml", fmt.Sprintf("tls:\n  cert_file: %s\n  key_file: %s\n  peer_ca_file: %s\n", cert, key, peerCA)+agentTestConfig)
	}
	good := config(cert, key, caFile)
	return []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"plaintext beyond loopback", []string{"--grpc-addr", "0.0.0.0:0"},
			"sluice agent: grpc_addr (--grpc-addr) 0.0.0.0:0 is not a loopback address, and the agent has no tls: set tls in the config file (cert_file, key_file, peer_ca_file), or insecure: true (or --insecure) to serve plaintext there on purpose\n"},
		{"plaintext gossip beyond loopback", []string{"--gossip-addr", ":0"},
			"sluice agent: gossip_addr (--gossip-addr) :0 is not a loopback address, and the agent has no tls: …"},
		{"insecure with tls", []string{"--config", good, "--insecure"},
			"sluice agent: --insecure serves plaintext, but " + good + " has a tls section\nrun 'sluice agent --help' for usage\n"},
		{"missing certificate", []string{"--config", config(missing, key, caFile), "--grpc-addr", "127.0.0.1:0"},
			"sluice agent: start node: sluice: tls: cert_file: stat " + missing + ": no such file or directory\n"},
		{"certificate is not PEM", []string{"--config", config(junk, key, caFile), "--grpc-addr", "127.0.0.1:0"},
			"sluice agent: start node: sluice: tls: cert_file: " + junk + ": holds no PEM certificate\n"},
		{"key of another certificate", []string{"--config", config(cert, otherKey, caFile), "--grpc-addr", "127.0.0.1:0"},
			"sluice agent: start node: sluice: tls: key_file: " + otherKey + ": the key does not match the certificate of cert_file\n"},
		{"CA is a named pipe", []string{"--config", config(cert, key, fifo), "--grpc-addr", "127.0.0.1:0"},
			"sluice agent: start node: sluice: tls: peer_ca_file: " + fifo + ": not a regular file (a named pipe)\n"},
	}
}
