package nodetls

import (
	"crypto/tls"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Options are a node's TLS settings.
type Options struct {
	Files
	// Certificate, when set, returns the node's certificate in place of
	// Files.Cert and Files.Key, at each handshake.
	Certificate func() (*tls.Certificate, error)
	// RequireClientCert refuses a client of the gRPC server that presents
	// no certificate.
	RequireClientCert bool
	// Reloaded, when set, is told of each reading of files that changed:
	// nil when the new material is in use, else why it is not (the
	// material before stays in use). It must not block.
	Reloaded func(error)
}

// checkEvery is how often, at most, a handshake reads the files to see
// whether they changed: cheap against the handshakes of a busy node, and
// soon enough for a rotation.
const checkEvery = time.Second

// Reloader holds a node's current TLS material and reads the files again,
// at most every checkEvery, when a handshake asks for it: new connections
// use new material once the files change, and connections already open
// keep theirs. It is safe for concurrent use.
type Reloader struct {
	opts Options
	cur  atomic.Pointer[Material]
	// checked is when the files were last read (Unix nanoseconds of the
	// wall clock).
	checked atomic.Int64
	// mu is held while the files are read; a handshake that finds it held
	// uses the current material rather than wait.
	mu sync.Mutex
	// failed is the contents that last failed to load, which are not
	// loaded again, nor reported, until they change.
	failed string
}

// New reads the files and returns their reloader, or an error (a
// *FileError for a file that cannot be read or is not right) naming the
// file and the problem.
func New(opts Options) (*Reloader, error) {
	if opts.PeerCA == "" {
		return nil, errors.New("peer_ca_file is required")
	}
	m, err := load(opts.Files, opts.Certificate == nil, time.Now())
	if err != nil {
		return nil, err
	}
	r := &Reloader{opts: opts}
	r.cur.Store(m)
	r.checked.Store(time.Now().UnixNano())
	return r, nil
}

// Material returns the current material, after reading the files again if
// checkEvery has passed since they were last read.
func (r *Reloader) Material() *Material {
	now := time.Now()
	if now.UnixNano()-r.checked.Load() >= int64(checkEvery) && r.mu.TryLock() {
		r.checked.Store(now.UnixNano())
		r.check(now, false)
		r.mu.Unlock()
	}
	return r.cur.Load()
}

// Reload reads the files now and uses what they hold from the next
// handshake on; it returns why not when they cannot be read or are not
// right, and the material in use stays. Files that did not change are
// not loaded again.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.checked.Store(now.UnixNano())
	return r.check(now, true)
}

// check loads the files if they changed since the material in use was
// read; unless forced, not if they hold what last failed. mu is held.
func (r *Reloader) check(now time.Time, force bool) error {
	data, key, err := contentsOf(r.opts.Files)
	if key == r.cur.Load().contents || key == r.failed && !force {
		return err
	}
	var m *Material
	if err == nil {
		m, err = parse(r.opts.Files, data, r.opts.Certificate == nil, now, key)
	}
	if err != nil {
		r.failed = key
	} else {
		r.failed = ""
		r.cur.Store(m)
	}
	if r.opts.Reloaded != nil {
		r.opts.Reloaded(err)
	}
	return err
}

// certificate returns the node's certificate of m, or Options.Certificate's.
func (r *Reloader) certificate(m *Material) (*tls.Certificate, error) {
	if r.opts.Certificate != nil {
		c, err := r.opts.Certificate()
		if err == nil && c == nil {
			err = errors.New("the node's Certificate function returned none")
		}
		return c, err
	}
	return m.cert, nil
}
