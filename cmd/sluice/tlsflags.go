package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// tlsFlags are the flags with which check, members and rules call a node
// over TLS: the CA to trust, the certificate to present, and the name to
// expect. None given, they call in plaintext.
type tlsFlags struct {
	ca, cert, key, serverName *string
}

// addTLSFlags defines the TLS flags on fs, of a command whose node is
// named by --addr.
func addTLSFlags(fs *flag.FlagSet) *tlsFlags { return addTLSFlagsFor(fs, "--addr") }

// addTLSFlagsFor is addTLSFlags for a command whose node is named by the
// flag addr.
func addTLSFlagsFor(fs *flag.FlagSet, addr string) *tlsFlags {
	return &tlsFlags{
		ca:         fs.String("tls-ca", "", "call the node over TLS, trusting the CA certificates of this PEM `FILE` (default: plaintext; with --tls-cert or --tls-server-name alone, the system's CAs)"),
		cert:       fs.String("tls-cert", "", "present this certificate, a PEM `FILE`, to a node that takes or requires client certificates; needs --tls-key"),
		key:        fs.String("tls-key", "", "the private key of --tls-cert, a PEM `FILE`"),
		serverName: fs.String("tls-server-name", "", "expect the node's certificate to name `NAME` (default: the host of "+addr+")"),
	}
}

// maxPEMFile bounds a file a TLS flag names.
const maxPEMFile = 1 << 20

// credentials returns the transport credentials of a call to addr: TLS
// when a TLS flag is given, else plaintext. A file that cannot be read or
// holds no certificate is an error naming the flag and the file.
func (f *tlsFlags) credentials(addr string) (credentials.TransportCredentials, error) {
	if *f.ca == "" && *f.cert == "" && *f.key == "" && *f.serverName == "" {
		return insecure.NewCredentials(), nil
	}
	if (*f.cert == "") != (*f.key == "") {
		return nil, usageError{errors.New("--tls-cert and --tls-key go together: the certificate and its key")}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: *f.serverName}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	if *f.ca != "" {
		data, err := readPEMFile("--tls-ca", *f.ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", *f.ca)
		}
	}
	if *f.cert != "" {
		certPEM, err := readPEMFile("--tls-cert", *f.cert)
		if err != nil {
			return nil, err
		}
		keyPEM, err := readPEMFile("--tls-key", *f.key)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", *f.cert, *f.key, err)
		}
		// Presented whatever CAs the node names as acceptable: a
		// certificate it refuses then says why, rather than that none
		// came.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return alertCreds{credentials.NewTLS(cfg)}, nil
}

// alertCreds are TLS credentials whose handshake waits for the node's
// first bytes, which a gRPC server sends at once. Under TLS 1.3 a server
// refuses a client's certificate after the client's side of the handshake
// is done: without the wait its alert ("certificate required") is lost,
// and the call fails later with a broken pipe that says nothing.
type alertCreds struct {
	credentials.TransportCredentials
}

func (c alertCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(deadline)
	}
	r := bufio.NewReader(conn)
	_, err = r.Peek(1)
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return &peekedConn{Conn: conn, r: r}, info, nil
}

func (c alertCreds) Clone() credentials.TransportCredentials {
	return alertCreds{c.TransportCredentials.Clone()}
}

// peekedConn is a connection whose first bytes were read ahead into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// readPEMFile reads the file a TLS flag names: a regular file (a named
// pipe would block the command), of at most maxPEMFile bytes.
func readPEMFile(flagName, path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: not a regular file", flagName, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: read %s: %w", flagName, path, err)
	case len(data) > maxPEMFile:
		return nil, fmt.Errorf("%s %s: larger than %d bytes", flagName, path, maxPEMFile)
	}
	return data, nil
}
