package nodetls

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster/internal/testcert"
)

// fixture is a CA, a node certificate it signed and the files of both.
type fixture struct {
	dir   string
	ca    *testcert.CA
	files Files
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "peer CA")
	cert, key := ca.Issue(t, "node", nil).WriteFiles(t, dir, "node")
	return &fixture{dir: dir, ca: ca, files: Files{Cert: cert, Key: key, PeerCA: ca.WriteFile(t, dir, "ca.pem")}}
}

func TestNewErrors(t *testing.T) {
	f := newFixture(t)
	other := testcert.NewCA(t, "other CA")
	write := func(name string, data []byte) string { return testcert.Write(t, filepath.Join(f.dir, name), data) }
	foreignCert, foreignKey := other.Issue(t, "foreign", nil).WriteFiles(t, f.dir, "foreign")
	serverOnly, serverOnlyKey := f.ca.Issue(t, "server-only", func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}).WriteFiles(t, f.dir, "server-only")
	expired, expiredKey := f.ca.Issue(t, "expired", func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	}).WriteFiles(t, f.dir, "expired")
	_, otherKey := f.ca.Issue(t, "other", nil).WriteFiles(t, f.dir, "other")
	fifo := filepath.Join(f.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := write("unreadable.pem", f.ca.PEM)
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	garbage := write("garbage.pem", []byte("not PEM at all\n"))
	keyAsCA := write("key-as-ca.pem", []byte(mustRead(t, f.files.Key)))
	badDER := write("bad-der.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))

	tests := []struct {
		name      string
		edit      func(*Files)
		wantField string
		want      string // a substring of the message
	}{
		{"no peer CA", func(fs *Files) { fs.PeerCA = "" }, "", "peer_ca_file is required"},
		{"missing cert", func(fs *Files) { fs.Cert = filepath.Join(f.dir, "nope.pem") }, "cert_file", "no such file or directory"},
		{"cert is a named pipe", func(fs *Files) { fs.Cert = fifo }, "cert_file", "not a regular file (a named pipe)"},
		{"key is a directory", func(fs *Files) { fs.Key = f.dir }, "key_file", "not a regular file (a directory)"},
		{"cert is not PEM", func(fs *Files) { fs.Cert = garbage }, "cert_file", garbage + ": holds no PEM certificate"},
		{"key is not PEM", func(fs *Files) { fs.Key = garbage }, "key_file", garbage + ": holds no PEM private key"},
		{"key of another cert", func(fs *Files) { fs.Key = otherKey }, "key_file", "the key does not match the certificate of cert_file"},
		{"peer CA is not PEM", func(fs *Files) { fs.PeerCA = garbage }, "peer_ca_file", "holds no PEM certificate"},
		{"peer CA holds a key", func(fs *Files) { fs.PeerCA = keyAsCA }, "peer_ca_file", `PEM block 1 is a "PRIVATE KEY", want CERTIFICATE blocks only`},
		{"peer CA is not DER", func(fs *Files) { fs.PeerCA = badDER }, "peer_ca_file", "certificate 1: x509: "},
		{"client CA is not PEM", func(fs *Files) { fs.ClientCA = garbage }, "client_ca_file", "holds no PEM certificate"},
		{"cert of another CA", func(fs *Files) { fs.Cert, fs.Key = foreignCert, foreignKey }, "cert_file",
			"does not verify against peer_ca_file, which every peer checks it against: x509: certificate signed by unknown authority"},
		{"cert for servers only", func(fs *Files) { fs.Cert, fs.Key = serverOnly, serverOnlyKey }, "cert_file",
			"extended key usage lacks clientAuth"},
		{"expired cert", func(fs *Files) { fs.Cert, fs.Key = expired, expiredKey }, "cert_file", "the certificate expired at "},
	}
	if os.Geteuid() != 0 { // root reads any file
		tests = append(tests, struct {
			name      string
			edit      func(*Files)
			wantField string
			want      string
		}{"unreadable CA", func(fs *Files) { fs.PeerCA = unreadable }, "peer_ca_file", "permission denied"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := f.files
			tt.edit(&files)
			_, err := New(Options{Files: files})
			if err == nil {
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Errorf("error %q is not one line", err)
			}
			var fe *FileError
			switch {
			case tt.wantField == "" && errors.As(err, &fe):
				t.Errorf("error %q is a FileError", err)
			case tt.wantField != "" && !errors.As(err, &fe):
				t.Errorf("error %q is no FileError", err)
			case tt.wantField != "" && (fe.Field != tt.wantField || !strings.HasPrefix(err.Error(), tt.wantField+": ")):
				t.Errorf("error %q names field %q, want %q first", err, fe.Field, tt.wantField)
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestIsPeer tells a peer's chain from a client's: the root decides.
func TestIsPeer(t *testing.T) {
	f := newFixture(t)
	clientCA := testcert.NewCA(t, "client CA")
	f.files.ClientCA = clientCA.WriteFile(t, f.dir, "client-ca.pem")
	r, err := New(Options{Files: f.files})
	if err != nil {
		t.Fatal(err)
	}
	verify := func(l *testcert.Leaf) [][]*x509.Certificate {
		chains, err := l.Cert.Verify(x509.VerifyOptions{Roots: r.Material().clientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			t.Fatal(err)
		}
		return chains
	}
	if !r.IsPeer(verify(f.ca.Issue(t, "peer", nil))) {
		t.Error("a peer CA's certificate is not a peer's")
	}
	if r.IsPeer(verify(clientCA.Issue(t, "client", nil))) {
		t.Error("a client CA's certificate is a peer's")
	}
	if r.IsPeer(nil) {
		t.Error("no chain is a peer's")
	}
}

// TestReload replaces the files: the reloader takes the new ones, keeps
// the old material while they are wrong, and reports each change once.
func TestReload(t *testing.T) {
	f := newFixture(t)
	var reports []error
	r, err := New(Options{Files: f.files, Reloaded: func(err error) { reports = append(reports, err) }})
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		c, err := r.certificate(r.Material())
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.String()
	}
	first := served()
	if err := r.Reload(); err != nil || len(reports) != 0 {
		t.Fatalf("Reload of unchanged files = %v, reports %v; want nil and none", err, reports)
	}

	// A certificate without its key: refused, the old one stays.
	next := f.ca.Issue(t, "node", nil)
	testcert.Write(t, f.files.Cert, next.CertPEM)
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Fatalf("Reload with a mismatched key = %v, want a key_file error", err)
	}
	if got := served(); got != first {
		t.Errorf("served %s after a failed reload, want the old %s", got, first)
	}
	// The failed contents are not tried again by a handshake.
	r.checked.Store(0)
	r.Material()
	if len(reports) != 1 || reports[0] == nil {
		t.Fatalf("reports %v, want one error", reports)
	}

	// The key arrives: the next handshake past checkEvery takes both.
	testcert.Write(t, f.files.Key, next.KeyPEM)
	r.checked.Store(0)
	if got, want := served(), next.Cert.SerialNumber.String(); got != want {
		t.Errorf("served %s after the key arrived, want %s", got, want)
	}
	if len(reports) != 2 || reports[1] != nil {
		t.Errorf("reports %v, want an error then nil", reports)
	}

	// Within checkEvery of a reading, a handshake reads nothing.
	testcert.Write(t, f.files.Cert, []byte("garbage"))
	r.checked.Store(time.Now().UnixNano())
	r.Material()
	if len(reports) != 2 {
		t.Errorf("a handshake within %v of a reading read the files: reports %v", checkEvery, reports)
	}
}
