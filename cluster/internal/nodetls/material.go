package nodetls

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cluster/internal/regularfile"
)

// Files names the PEM files of a node's TLS material.
type Files struct {
	// Cert is the node's certificate, followed by the intermediates
	// between it and its CA, and Key its private key. Both are empty when
	// Options.Certificate gives the certificate instead.
	Cert, Key string
	// PeerCA holds the CA certificates whose certificates make a peer.
	PeerCA string
	// ClientCA holds more CA certificates whose certificates clients may
	// present; empty for none.
	ClientCA string
}

// The fields of the files, as errors name them: the names of the agent's
// config file, which are those of cluster.TLS in snake case.
const (
	fieldCert     = "cert_file"
	fieldKey      = "key_file"
	fieldPeerCA   = "peer_ca_file"
	fieldClientCA = "client_ca_file"
)

// maxFileSize bounds a certificate, key or CA file: a bundle of hundreds
// of CAs is well under it.
const maxFileSize = 1 << 20

// FileError is a TLS file that cannot be read or does not hold what it
// should.
type FileError struct {
	// Field names the file's role: cert_file, key_file, peer_ca_file or
	// client_ca_file.
	Field string
	// Path is the file.
	Path string
	// Err says what is wrong; its text names the path.
	Err error
}

func (e *FileError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// Material is the TLS material of one reading of the files. It is never
// changed once built; a reload builds a new one.
type Material struct {
	// cert is the node's certificate; nil when Options.Certificate gives
	// it.
	cert *tls.Certificate
	// peerCAs verify peers; clientCAs, the peer CAs and the client CAs
	// together, verify a client's certificate.
	peerCAs, clientCAs *x509.CertPool
	// peerRoots are the peer CAs, DER, which IsPeer finds a chain's root
	// among.
	peerRoots map[string]bool
	// contents are what the files held, which tells a change.
	contents string
}

// contentsOf reads the files that are set, in the order of Files, and
// returns their contents, each as read, joined into one key that tells a
// change in any (a file that could not be read stands as its error), and
// the first read error.
func contentsOf(f Files) (data [4][]byte, key string, err error) {
	var b bytes.Buffer
	for i, path := range []string{f.Cert, f.Key, f.PeerCA, f.ClientCA} {
		if path == "" {
			b.WriteString("\x00-")
			continue
		}
		d, rerr := regularfile.Read(path, maxFileSize)
		if rerr != nil {
			if err == nil {
				err = &FileError{Field: fieldOf(i), Path: path, Err: rerr}
			}
			b.WriteString("\x00!" + rerr.Error())
			continue
		}
		data[i] = d
		fmt.Fprintf(&b, "\x00%d:", len(d))
		b.Write(d)
	}
	return data, b.String(), err
}

// fieldOf names file i of Files.
func fieldOf(i int) string {
	return [...]string{fieldCert, fieldKey, fieldPeerCA, fieldClientCA}[i]
}

// load reads the files and builds their material; ownCert says the node's
// certificate comes from the files, not from Options.Certificate.
func load(f Files, ownCert bool, now time.Time) (*Material, error) {
	data, key, err := contentsOf(f)
	if err != nil {
		return nil, err
	}
	return parse(f, data, ownCert, now, key)
}

// parse builds the material of the files' contents: the node's
// certificate must go with its key, be valid now, be usable by a server
// and a client, and come from a peer CA.
func parse(f Files, data [4][]byte, ownCert bool, now time.Time, key string) (*Material, error) {
	m := &Material{contents: key, peerRoots: map[string]bool{}}
	peerCAs, err := parseCerts(data[2])
	if err != nil {
		return nil, &FileError{Field: fieldPeerCA, Path: f.PeerCA, Err: fmt.Errorf("%s: %w", f.PeerCA, err)}
	}
	m.peerCAs, m.clientCAs = x509.NewCertPool(), x509.NewCertPool()
	for _, c := range peerCAs {
		m.peerCAs.AddCert(c)
		m.clientCAs.AddCert(c)
		m.peerRoots[string(c.Raw)] = true
	}
	if f.ClientCA != "" {
		clientCAs, err := parseCerts(data[3])
		if err != nil {
			return nil, &FileError{Field: fieldClientCA, Path: f.ClientCA, Err: fmt.Errorf("%s: %w", f.ClientCA, err)}
		}
		for _, c := range clientCAs {
			m.clientCAs.AddCert(c)
		}
	}
	if !ownCert {
		return m, nil
	}
	chain, err := parseCerts(data[0])
	if err != nil {
		return nil, &FileError{Field: fieldCert, Path: f.Cert, Err: fmt.Errorf("%s: %w", f.Cert, err)}
	}
	pair, err := tls.X509KeyPair(data[0], data[1])
	if err != nil {
		return nil, &FileError{Field: fieldKey, Path: f.Key, Err: fmt.Errorf("%s: %w", f.Key, keyError(err))}
	}
	if err := checkLeaf(chain, m.peerCAs, now); err != nil {
		return nil, &FileError{Field: fieldCert, Path: f.Cert, Err: fmt.Errorf("%s: %w", f.Cert, err)}
	}
	m.cert = &pair
	return m, nil
}

// keyError rewords what tls.X509KeyPair says of a key that does not fit.
func keyError(err error) error {
	msg := err.Error()
	switch {
	case msg == "tls: private key does not match public key":
		return errors.New("the key does not match the certificate of cert_file")
	case bytes.Contains([]byte(msg), []byte("failed to find any PEM data in key input")):
		return errors.New("holds no PEM private key")
	}
	return err
}

// parseCerts parses the CERTIFICATE blocks of a PEM file: at least one,
// and no block of another kind (a private key in a CA file is a mistake
// worth hearing of).
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %q, want CERTIFICATE blocks only", n, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("holds no PEM certificate")
	}
	return out, nil
}

// checkLeaf checks the node's certificate, chain[0] with its
// intermediates after it: valid at now, usable to serve and to dial (a
// node presents it both ways), and signed by a peer CA, which every peer
// checks it against.
func checkLeaf(chain []*x509.Certificate, peerCAs *x509.CertPool, now time.Time) error {
	leaf := chain[0]
	switch {
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		for _, u := range []struct {
			usage x509.ExtKeyUsage
			name  string
		}{{x509.ExtKeyUsageServerAuth, "serverAuth"}, {x509.ExtKeyUsageClientAuth, "clientAuth"}} {
			if !slices.Contains(leaf.ExtKeyUsage, u.usage) {
				return fmt.Errorf("the certificate's extended key usage lacks %s: a node serves its certificate and presents it when it dials a peer, so it needs serverAuth and clientAuth", u.name)
			}
		}
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: peerCAs, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}
		if _, err := leaf.Verify(opts); err != nil {
			return fmt.Errorf("the certificate does not verify against peer_ca_file, which every peer checks it against: %w", err)
		}
	}
	return nil
}

// IsPeer reports whether one of a connection's verified chains ends at a
// peer CA: the caller is a peer, not merely a client.
func (m *Material) IsPeer(chains [][]*x509.Certificate) bool {
	for _, chain := range chains {
		if len(chain) > 0 && m.peerRoots[string(chain[len(chain)-1].Raw)] {
			return true
		}
	}
	return false
}

// verifyPeer checks the certificates a peer presented (its leaf first)
// against the peer CAs, for usage.
func (m *Material) verifyPeer(certs []*x509.Certificate, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: m.peerCAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("the certificate of %q is not from a peer CA: %w", certs[0].Subject.String(), err)
	}
	return nil
}
