package strict

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/internal/nodetls"
	"github.com/sluicehq/sluice/cluster/internal/testcert"
	"github.com/sluicehq/sluice/window"
)

// tlsOf writes a certificate of ca for name, and ca, to a fresh directory
// and returns the node's TLS settings.
func tlsOf(t testing.TB, ca *testcert.CA, name string) *cluster.TLS {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, name, nil).WriteFiles(t, dir, name)
	return &cluster.TLS{CertFile: cert, KeyFile: key, PeerCAFile: ca.WriteFile(t, dir, "peer-ca.pem")}
}

// raftDialer is how a node of ca dials a Raft transport.
func raftDialer(t testing.TB, ca *testcert.CA, name string) *tls.Config {
	t.Helper()
	tc := tlsOf(t, ca, name)
	r, err := nodetls.New(nodetls.Options{Files: nodetls.Files{Cert: tc.CertFile, Key: tc.KeyFile, PeerCA: tc.PeerCAFile}})
	if err != nil {
		t.Fatal(err)
	}
	return r.RaftDialConfig(nil)
}

// raftHandshake dials addr with cfg and reports whether the Raft
// transport there took the connection: a TLS 1.3 client learns that its
// certificate was refused only when it reads, and Raft answers nothing
// until asked, so a read that is still waiting after wait is a connection
// the transport kept.
func raftHandshake(t testing.TB, addr string, cfg *tls.Config, wait time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := new(net.Dialer).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := nodetls.Dial(ctx, c, cfg)
	if err != nil {
		return err
	}
	defer tc.Close()
	_ = tc.SetReadDeadline(time.Now().Add(wait))
	_, err = tc.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil
	}
	return err
}

// TestStrictTLS: a strict group over TLS decides exactly, followers'
// checks forwarded to the leader; its Raft transport takes a peer of the
// CA and refuses a node of another CA and a dialer without a certificate.
func TestStrictTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	ca := testcert.NewCA(t, "fleet CA")
	rule := window.Rule{Name: "pay", Count: 30, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}
	cl := startStrictCluster(t, 3, []window.Rule{rule}, sharedClock(time.Hour), func(c *cluster.Config) {
		c.TLS = tlsOf(t, ca, c.Name)
		patientStrict(c)
	})
	leader := waitStrictGroup(t, cl, patience)
	admitted := 0
	for range 15 {
		for _, nd := range cl {
			d, err := nd.Allow(context.Background(), "pay", "acct", 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Path != window.PathStrict {
				t.Fatalf("%s decided on path %v, not by the log", nd.Name(), d.Path)
			}
			if d.Allowed {
				admitted++
			}
		}
	}
	if admitted != 30 {
		t.Errorf("admitted %d of 45, want the count 30", admitted)
	}
	for _, nd := range cl {
		if m := nd.Metrics(); m.TLSRefusalsGRPC != 0 || m.TLSRefusalsRaft != 0 {
			t.Errorf("%s refused %d gRPC and %d Raft connections of its own fleet", nd.Name(), m.TLSRefusalsGRPC, m.TLSRefusalsRaft)
		}
	}

	addr := leader.group().addr
	if err := raftHandshake(t, addr, raftDialer(t, ca, "peer"), time.Second); err != nil {
		t.Errorf("a peer of the CA could not connect to the Raft transport: %v", err)
	}
	other := testcert.NewCA(t, "other CA")
	if err := raftHandshake(t, addr, raftDialer(t, other, "foreign"), patience); err == nil {
		t.Error("a node of another CA connected to the Raft transport")
	}
	// That node refused the leader's certificate first; one that
	// presents its own whatever the server's is refused by the leader.
	foreign := other.Issue(t, "foreign", nil)
	blind := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, NextProtos: []string{"sluice-raft"},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign.TLS, nil }}
	if err := raftHandshake(t, addr, blind, patience); err == nil {
		t.Error("a dialer with another CA's certificate connected to the Raft transport")
	}
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, NextProtos: []string{"sluice-raft"}}
	if err := raftHandshake(t, addr, noCert, patience); err == nil {
		t.Error("a dialer without a certificate connected to the Raft transport")
	}
	waitFor(t, patience, "the leader counting its two refusals", func() bool { return leader.Metrics().TLSRefusalsRaft == 2 })
}

// TestStrictTLSForeignNode: a node of another CA that joins the fleet's
// gossip never takes part in its strict group: it is no voter, holds none
// of the log, and its checks are answered by the rule's fail mode while
// the group stays exact.
func TestStrictTLSForeignNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	ca, other := testcert.NewCA(t, "fleet CA"), testcert.NewCA(t, "other CA")
	rule := window.Rule{Name: "pay", Count: 10, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict, FailMode: window.FailClosed}
	now := sharedClock(time.Hour)
	cl := startStrictCluster(t, 2, []window.Rule{rule}, now, func(c *cluster.Config) {
		c.TLS = tlsOf(t, ca, c.Name)
		patientStrict(c)
	})
	leader := waitStrictGroup(t, cl, patience)
	cfg := cluster.Config{Name: "node-9", Rules: []window.Rule{rule}, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0",
		Join: []string{cl[0].GossipAddr()}, TLS: tlsOf(t, other, "node-9"), JoinTimeout: time.Second,
		ShutdownTimeout: time.Second, Logger: testLogger(t), Now: clockOf(now), StrictBootstrapWait: freshBootstrapWait,
		StrictTimeout: 200 * time.Millisecond}
	f, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	waitFor(t, patience, "gossip listing the foreign node", func() bool { return leader.Metrics().Peers == 2 })
	for range 10 {
		if d, err := leader.Allow(context.Background(), "pay", "acct", 1); err != nil || !d.Allowed || d.Path != window.PathStrict {
			t.Fatalf("leader: %+v, %v; want admitted by the log", d, err)
		}
	}
	d, err := f.Allow(context.Background(), "pay", "acct", 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Path == window.PathStrict {
		t.Errorf("the foreign node's check was decided by a log: %+v", d)
	}
	waitFor(t, patience, "the fleet refusing the foreign node", func() bool {
		return leader.Metrics().TLSRefusalsGRPC+leader.Metrics().TLSRefusalsRaft > 0
	})
	if got := leader.strictVoters(); got != 2 {
		t.Errorf("the group has %d voters, want the fleet's 2", got)
	}
	if g := f.group(); g != nil && g.raft.AppliedIndex() > 0 {
		t.Errorf("the foreign node applied %d entries of a log", g.raft.AppliedIndex())
	}
	if d, err := cl[1].Allow(context.Background(), "pay", "acct", 1); err != nil || d.Allowed || d.Path != window.PathStrict {
		t.Errorf("the 11th check = %+v, %v; want refused by the log", d, err)
	}
}
