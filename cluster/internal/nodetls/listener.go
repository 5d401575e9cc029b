package nodetls

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// HandshakeTimeout bounds a TLS handshake on the Raft transport: a peer
// completes one in milliseconds, and a dialer that stays silent is cut off
// after it.
const HandshakeTimeout = 10 * time.Second

// Listener is a TLS listener whose Accept returns connections whose
// handshake has completed: each runs in a goroutine of its own, under
// HandshakeTimeout, so a dialer that stays silent or fails the handshake
// never holds up the connections behind it, and the caller (Raft's
// transport) sees authenticated peers alone.
type Listener struct {
	inner   net.Listener
	cfg     *tls.Config
	refused func(remote net.Addr, err error)

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	out    chan accepted
	wg     sync.WaitGroup // the accept loop and the handshakes under way

	closeOnce sync.Once
}

// accepted is one result of Accept.
type accepted struct {
	conn net.Conn
	err  error
}

// NewListener serves TLS with cfg on inner. refused, when set, is told of
// each handshake that failed, but for a dialer that hung up before or
// during it (a port probe). The listener owns inner.
func NewListener(inner net.Listener, cfg *tls.Config, refused func(remote net.Addr, err error)) *Listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{inner: inner, cfg: cfg, refused: refused, ctx: ctx, cancel: cancel, out: make(chan accepted)}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// acceptLoop accepts connections and hands each to a handshake; an error
// of the inner listener goes to Accept, and ends the loop once the
// listener is closed.
func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case l.out <- accepted{err: err}:
			case <-l.ctx.Done():
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

// handshake completes c's handshake and hands it to Accept.
func (l *Listener) handshake(c net.Conn) {
	defer l.wg.Done()
	tc := tls.Server(c, l.cfg)
	ctx, cancel := context.WithTimeout(l.ctx, HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		if l.refused != nil && !HungUp(err) && l.ctx.Err() == nil {
			l.refused(c.RemoteAddr(), err)
		}
		_ = c.Close()
		return
	}
	select {
	case l.out <- accepted{conn: tc}:
	case <-l.ctx.Done():
		_ = tc.Close()
	}
}

// HungUp reports whether a handshake failed because the other end closed
// the connection, as a port probe does, rather than for a certificate.
func HungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// RemoteRefused reports whether a handshake failed because the other end
// sent an alert: it refused this end's certificate, or this end's offer.
func RemoteRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// Accept returns the next connection whose handshake completed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case a := <-l.out:
		return a.conn, a.err
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops accepting, cuts the handshakes under way and waits for them.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.cancel()
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Dial completes a TLS handshake over c, a connection to a peer, within
// ctx, with cfg (RaftDialConfig); c is closed if it fails.
func Dial(ctx context.Context, c net.Conn, cfg *tls.Config) (net.Conn, error) {
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}
