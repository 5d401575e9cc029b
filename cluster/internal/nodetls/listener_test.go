package nodetls

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster/internal/testcert"
)

// patience bounds what a test waits for; it only turns a hang into a
// failure.
const patience = time.Minute

// raftPair is a Raft listener of one node and the reloaders of it and of
// dialers.
type raftPair struct {
	lis *Listener
	f   *fixture

	mu      sync.Mutex
	refused []string
}

func newRaftPair(t *testing.T) *raftPair {
	t.Helper()
	f := newFixture(t)
	r, err := New(Options{Files: f.files})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &raftPair{f: f}
	p.lis = NewListener(inner, r.RaftServerConfig(), func(_ net.Addr, err error) {
		p.mu.Lock()
		p.refused = append(p.refused, err.Error())
		p.mu.Unlock()
	})
	t.Cleanup(func() { p.lis.Close() })
	return p
}

// dial dials the listener with cfg and reports the handshake's outcome,
// from both ends: a TLS 1.3 client learns of a refused certificate only
// when it reads.
func (p *raftPair) dial(t *testing.T, cfg *tls.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := new(net.Dialer).DialContext(ctx, "tcp", p.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := Dial(ctx, c, cfg)
	if err != nil {
		return err
	}
	defer tc.Close()
	_ = tc.SetReadDeadline(time.Now().Add(patience))
	_, err = tc.Read(make([]byte, 1))
	return err
}

// reloaderFor is a dialer's reloader: a node of ca.
func reloaderFor(t *testing.T, ca *testcert.CA, name string) *Reloader {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, name, nil).WriteFiles(t, dir, name)
	r, err := New(Options{Files: Files{Cert: cert, Key: key, PeerCA: ca.WriteFile(t, dir, "ca.pem")}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestListenerPeersOnly: a peer of the same CA is accepted; a dialer with
// another CA's certificate, or with none, is refused and reported; a
// silent dialer does not hold up the peer behind it.
func TestListenerPeersOnly(t *testing.T) {
	p := newRaftPair(t)
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := p.lis.Accept()
			if err != nil {
				close(accepted)
				return
			}
			go func() {
				// Answer one byte so that the dialer's read ends.
				_, _ = c.Write([]byte{1})
				accepted <- c
			}()
		}
	}()

	silent, err := net.Dial("tcp", p.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	peer := reloaderFor(t, p.f.ca, "peer")
	if err := p.dial(t, peer.RaftDialConfig(nil)); err != nil {
		t.Fatalf("a peer of the CA was refused: %v", err)
	}
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(patience):
		t.Fatal("the peer's connection never reached Accept")
	}

	foreign := reloaderFor(t, testcert.NewCA(t, "other CA"), "foreign")
	if err := p.dial(t, foreign.RaftDialConfig(nil)); err == nil {
		t.Error("a node of another CA was accepted")
	}
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, NextProtos: []string{raftProtocol}}
	if err := p.dial(t, noCert); err == nil {
		t.Error("a dialer without a certificate was accepted")
	}
	// A gRPC dialer (h2) does not handshake on the Raft port.
	h2 := peer.PeerConfig(nil)
	h2.NextProtos = []string{"h2"}
	if err := p.dial(t, h2); err == nil {
		t.Error("a dialer offering h2 was accepted on the Raft port")
	}
	deadline := time.Now().Add(patience)
	for {
		p.mu.Lock()
		n := len(p.refused)
		refused := strings.Join(p.refused, "; ")
		p.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals reported: %d (%s), want 3", n, refused)
		}
		time.Sleep(5 * time.Millisecond) // the poll interval
	}
	select {
	case c, ok := <-accepted:
		if ok {
			t.Errorf("a refused dialer reached Accept: %v", c.RemoteAddr())
		}
	default:
	}
}

// TestListenerClose: Close ends Accept and the handshakes under way.
func TestListenerClose(t *testing.T) {
	p := newRaftPair(t)
	silent, err := net.Dial("tcp", p.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	done := make(chan error, 1)
	go func() {
		_, err := p.lis.Accept()
		done <- err
	}()
	closed := make(chan struct{})
	go func() {
		p.lis.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(HandshakeTimeout / 2):
		t.Fatal("Close waited for a silent dialer's handshake")
	}
	if err := <-done; err == nil {
		t.Error("Accept returned a connection after Close")
	}
	if _, err := p.lis.Accept(); err == nil {
		t.Error("Accept after Close returned a connection")
	}
}
