package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster/internal/nodetls"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// TLS secures a node's gRPC port and its Raft transport (Config.TLS).
//
// One port serves two kinds of callers. Peers, other nodes of the fleet,
// present a certificate of a peer CA (PeerCAFile); only they may call the
// peer services, sluice.v1.Peer (Sync and Pull) and sluice.v1.Strict, and
// only they may connect to the Raft transport. Clients call the rest
// (sluice.v1.Limiter, Peer.Members, health, reflection and
// Config.GRPCServices) with a certificate of a peer or a client CA
// (ClientCAFile), or, unless RequireClientCert, with none. A client CA's
// certificate never passes as a peer's.
//
// The node presents its own certificate both ways: served to clients and
// peers, and given as a client certificate when it dials a peer. It must
// therefore allow serverAuth and clientAuth (or leave extended key usage
// out), and come from a peer CA. Peers do not match host names against
// each other's certificates: they dial the IP:PORT gossip advertises, and
// a peer CA's certificate is what makes a peer.
//
// Files are PEM and are read again, at most once a second, at the
// handshakes after they change (Node.ReloadTLS reads them at once): new
// connections use the new material, connections already open keep
// theirs. Files that cannot be read or do not fit together leave the
// material in use as it is, and the node logs why.
type TLS struct {
	// CertFile is the node's certificate, followed by the intermediates
	// between it and its CA, and KeyFile its private key. Required unless
	// Certificate is set.
	CertFile, KeyFile string
	// Certificate, when set, returns the node's certificate in place of
	// CertFile and KeyFile, for a program that holds it in memory (from a
	// secret store, say). It is called at every handshake and must be
	// safe for concurrent use and quick; the certificate it returns must
	// meet the same terms.
	Certificate func() (*tls.Certificate, error)
	// PeerCAFile holds the CA certificates whose certificates make a peer.
	// Required: every node of a fleet has the same.
	PeerCAFile string
	// ClientCAFile, optional, holds more CA certificates whose
	// certificates clients may present. A certificate of these CAs
	// reaches the client API and nothing else.
	ClientCAFile string
	// RequireClientCert refuses a client that presents no certificate (of
	// a peer or a client CA). Without it a client may call the client API
	// with none; the peer services need a peer's certificate either way.
	RequireClientCert bool
}

// checkTLS checks the node's TLS settings, and that a node without TLS
// serves plaintext on loopback alone unless Insecure says it means to.
func (cfg *Config) checkTLS() error {
	t := cfg.TLS
	switch {
	case t != nil && cfg.Insecure:
		return errors.New("sluice: TLS and Insecure are both set; Insecure serves plaintext, for a node without TLS")
	case t != nil && t.PeerCAFile == "":
		return errors.New("sluice: TLS.PeerCAFile is required: the CA whose certificates make peers")
	case t != nil && t.Certificate != nil && (t.CertFile != "" || t.KeyFile != ""):
		return errors.New("sluice: TLS.Certificate and TLS.CertFile/KeyFile are both set; set one")
	case t != nil && t.Certificate == nil && (t.CertFile == "" || t.KeyFile == ""):
		return errors.New("sluice: TLS needs CertFile and KeyFile, the node's certificate and key (or Certificate)")
	case t != nil || cfg.Insecure:
		return nil
	}
	for _, a := range []struct{ field, addr string }{
		{"GRPCAddr", cfg.GRPCAddr}, {"BindAddr", cfg.BindAddr}, {"RaftAddr", cfg.RaftAddr},
	} {
		if a.addr != "" && !isLoopback(a.addr) {
			return fmt.Errorf("sluice: %s %q is not a loopback address and the node has no TLS: set TLS, "+
				"or Insecure to serve plaintext there on purpose", a.field, a.addr)
		}
	}
	return nil
}

// isLoopback reports whether addr (HOST:PORT) listens on loopback alone:
// localhost, or a loopback IP. An empty or wildcard host listens on every
// interface; a name other than localhost may be any.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openTLS reads the node's TLS files, and says at start that a node
// without TLS serves plaintext.
func (n *Node) openTLS() error {
	t := n.cfg.TLS
	if t == nil {
		if n.cfg.GRPCAddr == "" && n.cfg.BindAddr == "" {
			return nil // serves nothing
		}
		if n.cfg.Insecure {
			n.log.Warn("serving plaintext gRPC and Raft (Insecure): whoever reaches these ports can call them as a client or as a peer",
				"grpc_addr", n.cfg.GRPCAddr)
		} else {
			n.log.Warn("serving plaintext gRPC and Raft on loopback; set TLS before serving other hosts", "grpc_addr", n.cfg.GRPCAddr)
		}
		return nil
	}
	r, err := nodetls.New(nodetls.Options{
		Files:       nodetls.Files{Cert: t.CertFile, Key: t.KeyFile, PeerCA: t.PeerCAFile, ClientCA: t.ClientCAFile},
		Certificate: t.Certificate, RequireClientCert: t.RequireClientCert, Reloaded: n.tlsReloaded,
	})
	if err != nil {
		return fmt.Errorf("sluice: tls: %w", err)
	}
	n.tls = r
	return nil
}

// tlsReloaded counts and logs a reading of TLS files that changed.
func (n *Node) tlsReloaded(err error) {
	if err != nil {
		n.metrics.TLSReloadErrors.Add(1)
		n.log.Warn("TLS files not reloaded; the material loaded before stays in use", "err", err)
		return
	}
	n.metrics.TLSReloads.Add(1)
	n.log.Info("TLS files reloaded: new connections use them")
}

// ReloadTLS reads the node's TLS files now, rather than at the first
// handshake a second after they changed (the agent calls it on SIGHUP).
// New connections use what they hold; connections already open keep
// theirs. When a file cannot be read or they do not fit together, the
// error says which and why, and the material in use stays. Files that did
// not change are not loaded again. A node without TLS, or whose
// certificate comes from TLS.Certificate, has no certificate files to
// read; the CA files are read all the same.
func (n *Node) ReloadTLS() error {
	if n.tls == nil {
		return nil
	}
	if err := n.tls.Reload(); err != nil {
		return fmt.Errorf("sluice: tls: %w", err)
	}
	return nil
}

// Transports whose TLS refusals are counted apart.
const (
	transportGRPC = "grpc"
	transportRaft = "raft"
)

// tlsRefused counts and logs a connection or a call refused for its
// certificate on transport: the remote end's, or the node's own refusal
// of a peer it dialled (remote nil). A handshake the remote end broke
// off, refusing this node's certificate, is the remote end's refusal to
// count; this node logs it.
func (n *Node) tlsRefused(transport string, remote net.Addr, err error) {
	if n.isClosing.Load() {
		return
	}
	attrs := []any{"transport", transport, "err", err}
	if remote != nil {
		attrs = append(attrs, "remote", remote.String())
	}
	if nodetls.RemoteRefused(err) {
		n.log.Warn("a caller refused this node's certificate", attrs...)
		return
	}
	if transport == transportRaft {
		n.metrics.TLSRefusalsRaft.Add(1)
	} else {
		n.metrics.TLSRefusalsGRPC.Add(1)
	}
	n.log.Warn("refused a connection for its certificate", attrs...)
}

// serverOptions are the gRPC server's TLS options: its credentials, a
// bound on the handshake and the check of callers of the peer services.
// None without TLS.
func (n *Node) serverOptions() []grpc.ServerOption {
	if n.tls == nil {
		return nil
	}
	creds := refusalWatch{TransportCredentials: credentials.NewTLS(n.tls.ServerConfig()),
		refused: func(remote net.Addr, err error) { n.tlsRefused(transportGRPC, remote, err) }}
	return []grpc.ServerOption{
		grpc.Creds(creds),
		grpc.ConnectionTimeout(nodetls.HandshakeTimeout),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := n.authorizePeer(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := n.authorizePeer(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// peerCredentials are the credentials of the node's gRPC dials to peers:
// its certificate out, a peer CA's expected back; plaintext without TLS.
func (n *Node) peerCredentials() credentials.TransportCredentials {
	if n.tls == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(n.tls.PeerConfig(func(err error) { n.tlsRefused(transportGRPC, nil, err) }))
}

// peerOnly reports whether method (/service/method) is for peers alone:
// the peer services, but for Peer.Members, which lists the fleet for
// operators (`sluice members`), as Limiter.Rules lists the rules. A method
// added to a peer service later is for peers until said otherwise.
func peerOnly(method string) bool {
	if method == sluicev1.Peer_Members_FullMethodName {
		return false
	}
	for _, svc := range []string{sluicev1.Peer_ServiceDesc.ServiceName, sluicev1.Strict_ServiceDesc.ServiceName} {
		if strings.HasPrefix(method, "/"+svc+"/") {
			return true
		}
	}
	return false
}

// authorizePeer refuses a call of a peer service from a caller without a
// peer CA's certificate: Unauthenticated without a certificate,
// PermissionDenied with a client CA's.
func (n *Node) authorizePeer(ctx context.Context, method string) error {
	if !peerOnly(method) {
		return nil
	}
	p, _ := grpcpeer.FromContext(ctx)
	var info credentials.TLSInfo
	if p != nil {
		info, _ = p.AuthInfo.(credentials.TLSInfo)
	}
	var err error
	switch certs := info.State.PeerCertificates; {
	case len(certs) == 0:
		err = status.Errorf(codes.Unauthenticated, "sluice: %s is for peers: the caller presented no certificate", method)
	case !n.tls.IsPeer(info.State.VerifiedChains):
		err = status.Errorf(codes.PermissionDenied, "sluice: %s is for peers: the caller's certificate (%s) is not from a peer CA",
			method, certs[0].Subject.String())
	default:
		return nil
	}
	var remote net.Addr
	if p != nil {
		remote = p.Addr
	}
	n.tlsRefused(transportGRPC, remote, err)
	return err
}

// refusalWatch is TLS credentials that report the handshakes the server
// refused: a certificate of no trusted CA, none when one is required, or
// a caller that does not speak TLS.
type refusalWatch struct {
	credentials.TransportCredentials
	refused func(remote net.Addr, err error)
}

func (c refusalWatch) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil && !nodetls.HungUp(err) {
		c.refused(conn.RemoteAddr(), err)
	}
	return out, info, err
}

func (c refusalWatch) Clone() credentials.TransportCredentials {
	return refusalWatch{TransportCredentials: c.TransportCredentials.Clone(), refused: c.refused}
}

// listenRaft opens the Raft transport's listener: with TLS, one that
// accepts peers alone, each once its handshake has completed.
func (n *Node) listenRaft(ctx context.Context, addr string) (net.Listener, error) {
	lis, err := n.listen(ctx, addr)
	if err != nil || n.tls == nil {
		return lis, err
	}
	return nodetls.NewListener(lis, n.tls.RaftServerConfig(), func(remote net.Addr, err error) {
		n.tlsRefused(transportRaft, remote, err)
	}), nil
}

// dialRaft dials a peer's Raft transport: with TLS, the handshake is
// complete, within ctx, when it returns.
func (n *Node) dialRaft(ctx context.Context, addr string) (net.Conn, error) {
	c, err := n.network().Dial(ctx, addr)
	if err != nil || n.tls == nil {
		return c, err
	}
	tc, err := nodetls.Dial(ctx, c, n.tls.RaftDialConfig(func(err error) { n.tlsRefused(transportRaft, nil, err) }))
	if err != nil {
		return nil, fmt.Errorf("raft TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}
