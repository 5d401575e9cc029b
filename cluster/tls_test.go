package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster/internal/testcert"
	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// tlsFiles writes a certificate of ca for a node and ca itself to a fresh
// directory and returns the node's TLS settings.
func tlsFiles(t testing.TB, ca *testcert.CA, name string) *TLS {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, name, nil).WriteFiles(t, dir, name)
	return &TLS{CertFile: cert, KeyFile: key, PeerCAFile: ca.WriteFile(t, dir, "peer-ca.pem")}
}

// startTLSMember starts a gossiping node with TLS settings tc that joins
// seeds, on a clock that starts a minute's window.
func startTLSMember(t testing.TB, name string, tc *TLS, rules []window.Rule, seeds []*Node, joinTimeout time.Duration) *Node {
	t.Helper()
	var join []string
	for _, s := range seeds {
		join = append(join, s.GossipAddr())
	}
	nd, err := Start(context.Background(), Config{
		Name: name, Rules: rules, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", Join: join, TLS: tc,
		JoinTimeout: joinTimeout, ShutdownTimeout: time.Second, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}

// sharedRule is a batched rule every node syncs with every other.
var sharedRule = window.Rule{Name: "shared", Count: 100, Window: time.Hour, Type: window.Fixed,
	SyncInterval: 20 * time.Millisecond, Allocation: window.Adaptive}

// TestTLSFleetShares: three nodes of one CA form a fleet over TLS and
// share a batched limit; none refused another.
func TestTLSFleetShares(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	ca := testcert.NewCA(t, "fleet CA")
	rules := []window.Rule{sharedRule}
	var nodes []*Node
	for i := range 3 {
		nodes = append(nodes, startTLSMember(t, fmt.Sprintf("node-%d", i), tlsFiles(t, ca, fmt.Sprintf("node-%d", i)), rules, nodes, 5*time.Second))
	}
	waitFor(t, patience, "every node sees every other", peersAre(nodes, 2))
	spend(t, nodes[0], "shared", "k", 7)
	for _, nd := range nodes[1:] {
		waitFor(t, patience, nd.Name()+" seeing the 7 hits node-0 admitted", viewIs(nd, "shared", "k", 7))
	}
	for _, nd := range nodes {
		if m := nd.Metrics(); m.TLSRefusalsGRPC != 0 || m.TLSRefusalsRaft != 0 {
			t.Errorf("%s refused %d gRPC and %d Raft connections of its own fleet", nd.Name(), m.TLSRefusalsGRPC, m.TLSRefusalsRaft)
		}
	}
}

// spend admits hits of key on nd, one at a time.
func spend(t testing.TB, nd *Node, rule, key string, hits int) {
	t.Helper()
	for range hits {
		d, err := nd.Allow(context.Background(), rule, key, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("%s: Allow = %+v, %v; want admitted", nd.Name(), d, err)
		}
	}
}

// viewIs reports whether nd's view of key holds want hits in the current
// window.
func viewIs(nd *Node, rule, key string, want int64) func() bool {
	return func() bool {
		_, view, err := nd.View(rule, key)
		return err == nil && view.Curr == want
	}
}

// TestTLSForeignNodeIsNoPeer: a node whose certificate comes from another
// CA joins the fleet's gossip, but cannot open a sync stream to the fleet
// nor pull its state, and the fleet's nodes refuse it, count it and go on
// syncing with each other.
func TestTLSForeignNodeIsNoPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	ca, other := testcert.NewCA(t, "fleet CA"), testcert.NewCA(t, "other CA")
	// owned is a small count under owner allocation, whose checks ask a
	// key's owner once a node's grant is spent.
	owned := window.Rule{Name: "owned", Count: 6, Window: time.Hour, Type: window.Fixed,
		SyncInterval: 20 * time.Millisecond, Allocation: window.Owner}
	rules := []window.Rule{sharedRule, owned}
	a := startTLSMember(t, "a", tlsFiles(t, ca, "a"), rules, nil, 5*time.Second)
	b := startTLSMember(t, "b", tlsFiles(t, ca, "b"), rules, []*Node{a}, 5*time.Second)
	// It pulls from no one, so that it does not wait long for a pull.
	f := startTLSMember(t, "foreign", tlsFiles(t, other, "foreign"), rules, []*Node{a}, time.Second)
	nodes := []*Node{a, b, f}
	waitFor(t, patience, "gossip listing every node", peersAre(nodes, 2))
	if f.Ready() {
		t.Error("the foreign node pulled the fleet's state")
	}
	spend(t, a, "shared", "k", 5)
	spend(t, f, "shared", "k", 3)
	waitFor(t, patience, "b seeing a's 5 hits", viewIs(b, "shared", "k", 5))
	for _, nd := range []*Node{a, b} {
		waitFor(t, patience, nd.Name()+" refusing the foreign node", func() bool { return nd.Metrics().TLSRefusalsGRPC > 0 })
	}
	waitFor(t, patience, "the foreign node refusing the fleet's certificates", func() bool { return f.Metrics().TLSRefusalsGRPC > 0 })
	// The foreign node's hits reached no one, and the fleet's reached it
	// not: b saw a's 5, which a sent the foreign node as well.
	for _, nd := range []*Node{a, b} {
		if _, view, _ := nd.View("shared", "k"); view.Curr != 5 {
			t.Errorf("%s's view holds %d hits, want a's 5 alone", nd.Name(), view.Curr)
		}
	}
	if _, view, _ := f.View("shared", "k"); view.Curr != 3 {
		t.Errorf("the foreign node's view holds %d hits, want its own 3 alone", view.Curr)
	}
	// Gossip lists the foreign node, but the fleet counts it as no owner:
	// were it one, a third of the keys would wait on it and be refused.
	// Each key's count, spent over a and b, is admitted in full, and the
	// next check refused; no question went unanswered.
	for k := range 12 {
		key := fmt.Sprint("user-", k)
		for i := range owned.Count + 1 {
			nd := nodes[i%2]
			d, err := nd.Allow(context.Background(), "owned", key, 1)
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(i) < owned.Count; d.Allowed != want {
				t.Fatalf("%s, check %d of %q: %+v, want allowed=%v", nd.Name(), i+1, key, d, want)
			}
		}
	}
	for _, nd := range []*Node{a, b} {
		if n := nd.Metrics().BorrowTimeouts; n != 0 {
			t.Errorf("%s: %d questions to an owner unanswered", nd.Name(), n)
		}
	}
}

// tlsClient dials nd as a client that trusts ca and presents cert (nil:
// none).
func tlsClient(t testing.TB, nd *Node, ca *testcert.CA, cert *testcert.Leaf) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Presented whatever CAs the server names as acceptable, as a
		// node presents its own: Certificates would send none of a CA
		// the server does not name.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.TLS, nil }
	}
	conn, err := grpc.NewClient("passthrough:///"+nd.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// callers are the calls TestTLSCallers makes: a client's and a peer's.
var callers = []struct {
	name string
	call func(ctx context.Context, conn *grpc.ClientConn) error
}{
	{"Check", func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := sluicev1.NewLimiterClient(conn).Check(ctx, &sluicev1.CheckRequest{Rule: "shared", Key: "k", Hits: 0})
		return err
	}},
	{"Members", func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := sluicev1.NewPeerClient(conn).Members(ctx, &sluicev1.MembersRequest{})
		return err
	}},
	{"Pull", func(ctx context.Context, conn *grpc.ClientConn) error {
		s, err := sluicev1.NewPeerClient(conn).Pull(ctx, &sluicev1.PullRequest{From: wire.EncodeInc(counter.Incarnation{Node: "tester", Boot: 1})})
		if err != nil {
			return err
		}
		for {
			if _, err := s.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}},
	{"Sync", func(ctx context.Context, conn *grpc.ClientConn) error {
		s, err := sluicev1.NewPeerClient(conn).Sync(ctx, grpc.ForceCodecV2(newPeerCodec()))
		if err != nil {
			return err
		}
		_, err = s.CloseAndRecv()
		return err
	}},
}

// TestTLSCallers: who may call what on a node with TLS. A peer CA's
// certificate reaches everything; a client CA's, and none (unless client
// certificates are required), the client API alone; another CA's,
// nothing. Each refusal counts.
func TestTLSCallers(t *testing.T) {
	peerCA, clientCA, other := testcert.NewCA(t, "peer CA"), testcert.NewCA(t, "client CA"), testcert.NewCA(t, "other CA")
	peerCert, clientCert, foreignCert := peerCA.Issue(t, "peer", nil), clientCA.Issue(t, "client", nil), other.Issue(t, "foreign", nil)
	const (
		ok    = codes.OK
		noTLS = codes.Unavailable // the handshake failed
		none  = codes.Unauthenticated
		deny  = codes.PermissionDenied
	)
	tests := []struct {
		name    string
		require bool
		cert    *testcert.Leaf
		want    []codes.Code // Check, Members, Pull, Sync
	}{
		{"peer", false, peerCert, []codes.Code{ok, ok, ok, ok}},
		{"client CA", false, clientCert, []codes.Code{ok, ok, deny, deny}},
		{"no certificate", false, nil, []codes.Code{ok, ok, none, none}},
		{"another CA", false, foreignCert, []codes.Code{noTLS, noTLS, noTLS, noTLS}},
		{"peer, client certificates required", true, peerCert, []codes.Code{ok, ok, ok, ok}},
		{"client CA, client certificates required", true, clientCert, []codes.Code{ok, ok, deny, deny}},
		{"no certificate, client certificates required", true, nil, []codes.Code{noTLS, noTLS, noTLS, noTLS}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := tlsFiles(t, peerCA, "node")
			tc.ClientCAFile = clientCA.WriteFile(t, t.TempDir(), "client-ca.pem")
			tc.RequireClientCert = tt.require
			nd, err := Start(context.Background(), Config{Name: "node", Rules: []window.Rule{sharedRule},
				GRPCAddr: "127.0.0.1:0", TLS: tc, Logger: testLogger(t), ShutdownTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer nd.Close()
			conn := tlsClient(t, nd, peerCA, tt.cert)
			refusals, handshakes := 0, 0
			for i, c := range callers {
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				err := c.call(ctx, conn)
				cancel()
				if got := status.Code(err); got != tt.want[i] {
					t.Errorf("%s: code %v (%v), want %v", c.name, got, err, tt.want[i])
				}
				switch tt.want[i] {
				case none, deny:
					refusals++
				case noTLS:
					handshakes = 1 // gRPC waits before it dials again
				}
				if tt.want[i] == none || tt.want[i] == deny {
					if msg := status.Convert(err).Message(); !strings.Contains(msg, "is for peers") {
						t.Errorf("%s: message %q does not say the method is for peers", c.name, msg)
					}
				}
			}
			// The server counts a refused handshake when its side of it
			// ends, which may be after the client's.
			want := int64(refusals + handshakes)
			waitFor(t, patience, fmt.Sprintf("TLSRefusalsGRPC reaching %d", want), func() bool {
				return nd.Metrics().TLSRefusalsGRPC >= want
			})
		})
	}
}

// TestTLSPlaintextClientRefused: a client without TLS cannot call a node
// that has it.
func TestTLSPlaintextClientRefused(t *testing.T) {
	ca := testcert.NewCA(t, "CA")
	nd, err := Start(context.Background(), Config{Name: "node", Rules: []window.Rule{sharedRule},
		GRPCAddr: "127.0.0.1:0", TLS: tlsFiles(t, ca, "node"), Logger: testLogger(t), ShutdownTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	conn, err := grpc.NewClient("passthrough:///"+nd.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	_, err = sluicev1.NewLimiterClient(conn).Check(ctx, &sluicev1.CheckRequest{Rule: "shared", Key: "k"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a plaintext Check = %v, want Unavailable", err)
	}
}

// servedSerial dials addr as a TLS client trusting ca, on a new
// connection, and returns the serial of the certificate served.
func servedSerial(t testing.TB, addr string, ca *testcert.CA) string {
	t.Helper()
	d := &tls.Dialer{Config: &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"h2"}}}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSRotation replaces a node's certificate files on disk while it
// runs: new connections get the new certificate, the node's sync with its
// peer goes on, and files that do not parse leave the certificate in use.
func TestTLSRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster")
	}
	ca := testcert.NewCA(t, "CA")
	rules := []window.Rule{sharedRule}
	atc := tlsFiles(t, ca, "a")
	a := startTLSMember(t, "a", atc, rules, nil, 5*time.Second)
	b := startTLSMember(t, "b", tlsFiles(t, ca, "b"), rules, []*Node{a}, 5*time.Second)
	waitFor(t, patience, "a and b seeing each other", peersAre([]*Node{a, b}, 1))
	first := servedSerial(t, a.GRPCAddr(), ca)

	next := ca.Issue(t, "a", nil)
	testcert.Write(t, atc.KeyFile, next.KeyPEM)
	testcert.Write(t, atc.CertFile, next.CertPEM)
	want := next.Cert.SerialNumber.String()
	waitFor(t, patience, "a serving its new certificate", func() bool { return servedSerial(t, a.GRPCAddr(), ca) == want })
	if first == want {
		t.Fatal("the two certificates share a serial")
	}
	if got := a.Metrics().TLSReloads; got != 1 {
		t.Errorf("TLSReloads = %d, want 1", got)
	}
	spend(t, a, "shared", "k", 4)
	spend(t, b, "shared", "k", 2)
	waitFor(t, patience, "b seeing a's hits after the rotation", viewIs(b, "shared", "k", 6))
	waitFor(t, patience, "a seeing b's hits after the rotation", viewIs(a, "shared", "k", 6))

	// A certificate file cut short: refused, the certificate in use stays.
	testcert.Write(t, atc.CertFile, next.CertPEM[:len(next.CertPEM)/2])
	err := a.ReloadTLS()
	if err == nil || !strings.Contains(err.Error(), "cert_file") || !strings.Contains(err.Error(), atc.CertFile) {
		t.Errorf("ReloadTLS with a broken certificate = %v, want an error naming cert_file and %s", err, atc.CertFile)
	}
	if got := servedSerial(t, a.GRPCAddr(), ca); got != want {
		t.Errorf("a serves %s after a failed reload, want %s", got, want)
	}
	if got := a.Metrics().TLSReloadErrors; got != 1 {
		t.Errorf("TLSReloadErrors = %d, want 1", got)
	}
}

// TestStartTLSErrors: settings Start refuses, each with a message naming
// what to set or the file at fault.
func TestStartTLSErrors(t *testing.T) {
	ca := testcert.NewCA(t, "CA")
	good := tlsFiles(t, ca, "node")
	missing := filepath.Join(t.TempDir(), "nope.pem")
	unreadable := testcert.Write(t, filepath.Join(t.TempDir(), "locked.pem"), ca.PEM)
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*TLS)) *TLS {
		c := *good
		f(&c)
		return &c
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"TLS and Insecure", Config{GRPCAddr: "127.0.0.1:0", TLS: good, Insecure: true}, "sluice: TLS and Insecure are both set"},
		{"no peer CA", Config{GRPCAddr: "127.0.0.1:0", TLS: edit(func(c *TLS) { c.PeerCAFile = "" })}, "sluice: TLS.PeerCAFile is required"},
		{"no key", Config{GRPCAddr: "127.0.0.1:0", TLS: edit(func(c *TLS) { c.KeyFile = "" })}, "sluice: TLS needs CertFile and KeyFile"},
		{"certificate twice", Config{GRPCAddr: "127.0.0.1:0", TLS: edit(func(c *TLS) {
			c.Certificate = func() (*tls.Certificate, error) { return nil, nil }
		})}, "sluice: TLS.Certificate and TLS.CertFile/KeyFile are both set"},
		{"missing certificate", Config{GRPCAddr: "127.0.0.1:0", TLS: edit(func(c *TLS) { c.CertFile = missing })},
			"sluice: tls: cert_file: stat " + missing + ": no such file or directory"},
		{"plaintext beyond loopback", Config{GRPCAddr: "0.0.0.0:0"},
			`sluice: GRPCAddr "0.0.0.0:0" is not a loopback address and the node has no TLS: set TLS, or Insecure`},
		{"plaintext gossip on every interface", Config{GRPCAddr: "127.0.0.1:0", BindAddr: ":0"}, `sluice: BindAddr ":0" is not a loopback address`},
		{"plaintext Raft on a name", Config{GRPCAddr: "127.0.0.1:0", RaftAddr: "raft.example:0"}, `sluice: RaftAddr "raft.example:0" is not a loopback address`},
	}
	if os.Geteuid() != 0 {
		tests = append(tests, struct {
			name string
			cfg  Config
			want string
		}{"unreadable CA", Config{GRPCAddr: "127.0.0.1:0", TLS: edit(func(c *TLS) { c.PeerCAFile = unreadable })},
			"sluice: tls: peer_ca_file: open " + unreadable + ": permission denied"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Rules, cfg.Logger = []window.Rule{sharedRule}, testLogger(t)
			nd, err := Start(context.Background(), cfg)
			if err == nil {
				nd.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n got %q\nwant %q…", err, tt.want)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "127.9.9.9:0": true, "[::1]:7070": true, "localhost:7070": true, "LOCALHOST:1": true,
		":7070": false, "0.0.0.0:7070": false, "[::]:7070": false, "10.0.0.1:7070": false, "host.example:7070": false,
		"no-port": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestTLSCertificateFunc: a node whose certificate comes from
// TLS.Certificate serves it, and peers with files accept it.
func TestTLSCertificateFunc(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster")
	}
	ca := testcert.NewCA(t, "CA")
	leaf := ca.Issue(t, "a", nil)
	atc := &TLS{Certificate: func() (*tls.Certificate, error) { return &leaf.TLS, nil },
		PeerCAFile: ca.WriteFile(t, t.TempDir(), "ca.pem")}
	rules := []window.Rule{sharedRule}
	a := startTLSMember(t, "a", atc, rules, nil, 5*time.Second)
	b := startTLSMember(t, "b", tlsFiles(t, ca, "b"), rules, []*Node{a}, 5*time.Second)
	waitFor(t, patience, "a and b seeing each other", peersAre([]*Node{a, b}, 1))
	if got, want := servedSerial(t, a.GRPCAddr(), ca), leaf.Cert.SerialNumber.String(); got != want {
		t.Errorf("a serves %s, want %s", got, want)
	}
	spend(t, a, "shared", "k", 3)
	waitFor(t, patience, "b seeing a's hits", viewIs(b, "shared", "k", 3))
}
