package nodetls

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster/internal/testcert"
)

// FuzzParse feeds arbitrary certificate, key and CA files to the parser:
// it never panics, and what it refuses it refuses with one line naming
// the file's field.
func FuzzParse(f *testing.F) {
	ca := testcert.NewCA(f, "CA")
	leaf := ca.Issue(f, "node", nil)
	f.Add(leaf.CertPEM, leaf.KeyPEM, ca.PEM)
	f.Add(leaf.CertPEM, leaf.KeyPEM, leaf.CertPEM)
	f.Add(ca.PEM, leaf.KeyPEM, ca.PEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n"), []byte{}, []byte("x"))
	f.Add(append(leaf.CertPEM, ca.PEM...), leaf.CertPEM, append(ca.PEM, leaf.KeyPEM...))
	files := Files{Cert: "cert.pem", Key: "key.pem", PeerCA: "ca.pem"}
	now := time.Now()
	f.Fuzz(func(t *testing.T, cert, key, peerCA []byte) {
		m, err := parse(files, [4][]byte{cert, key, peerCA}, true, now, "")
		if err != nil {
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") {
				t.Errorf("error %q is not one line", msg)
			}
			if !strings.HasPrefix(msg, "cert_file: ") && !strings.HasPrefix(msg, "key_file: ") && !strings.HasPrefix(msg, "peer_ca_file: ") {
				t.Errorf("error %q names no file", msg)
			}
			return
		}
		if m.cert == nil || len(m.peerRoots) == 0 {
			t.Errorf("parse succeeded without a certificate or a peer CA")
		}
	})
}
