package nodetls

import (
	"crypto/tls"
	"crypto/x509"
)

// raftProtocol is the ALPN name of the Raft transport. Its server and its
// dialer agree on it and the gRPC server offers only h2, so a connection
// meant for one port never handshakes on the other.
const raftProtocol = "sluice-raft"

// ServerConfig is the gRPC server's configuration: it serves the node's
// certificate, verifies a client's certificate against the peer and
// client CAs when one is given (Material.IsPeer then says whether it is a
// peer's), and with RequireClientCert refuses a client that gives none.
// gRPC's credentials add h2 to what it negotiates.
func (r *Reloader) ServerConfig() *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if r.opts.RequireClientCert {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.Material()
			return &tls.Config{
				MinVersion:     tls.VersionTLS12,
				GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.certificate(m) },
				ClientAuth:     auth,
				ClientCAs:      m.clientCAs,
				// Every connection is verified against the CAs of the
				// moment: a resumed session would skip that.
				SessionTicketsDisabled: true,
			}, nil
		},
	}
}

// PeerConfig is the configuration of the node's dials to peers, over gRPC
// and the Raft transport: it presents the node's certificate and accepts a
// server whose certificate comes from a peer CA.
//
// It matches no host name. Peers dial each other at the addresses gossip
// advertises, IP:PORT that a wildcard listener, a container or NAT picked
// and that a certificate rarely names; and what makes a peer is its
// certificate's CA, the same test its server applies to this node's
// certificate. A certificate of the peer CA admits its holder as any
// peer: the CA issues them to the fleet's nodes alone.
//
// refused, when set, is told of each server this node refused.
func (r *Reloader) PeerConfig(refused func(error)) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Verification is VerifyConnection's, against the peer CAs only,
		// without a host name.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.certificate(r.Material())
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			err := r.Material().verifyPeer(cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil && refused != nil {
				refused(err)
			}
			return err
		},
	}
}

// RaftDialConfig is PeerConfig for the Raft transport.
func (r *Reloader) RaftDialConfig(refused func(error)) *tls.Config {
	c := r.PeerConfig(refused)
	c.NextProtos = []string{raftProtocol}
	return c
}

// RaftServerConfig is the Raft transport's listener configuration: peers
// alone, with a certificate from a peer CA, may connect.
func (r *Reloader) RaftServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{raftProtocol},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.Material()
			return &tls.Config{
				MinVersion:             tls.VersionTLS13,
				NextProtos:             []string{raftProtocol},
				GetCertificate:         func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.certificate(m) },
				ClientAuth:             tls.RequireAndVerifyClientCert,
				ClientCAs:              m.peerCAs,
				SessionTicketsDisabled: true,
			}, nil
		},
	}
}

// IsPeer reports whether chains, a connection's verified chains, show the
// caller holds a certificate of a peer CA of the current material.
func (r *Reloader) IsPeer(chains [][]*x509.Certificate) bool {
	return r.Material().IsPeer(chains)
}
