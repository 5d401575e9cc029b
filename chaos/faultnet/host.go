package faultnet

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/cluster"
)

// Host is one node's view of the switchboard, the cluster.Network of its
// Config: every stream it dials and every packet it sends is known to come
// from it, and every address it listens on is known to be its own.
type Host struct {
	sb   *Switchboard
	name string
}

var _ cluster.Network = (*Host)(nil)

// Name returns the node's name.
func (h *Host) Name() string { return h.name }

// synRTO is how long a dial waits for a lost SYN to be sent again, as
// Linux does (doubling after each loss).
const synRTO = time.Second

// errListenerClosed is what Accept returns once the listener is closed.
var errListenerClosed = fmt.Errorf("faultnet: listener closed: %w", net.ErrClosed)

// Listen opens a TCP listener on addr, which must be on loopback (port 0
// picks a free one), and records the node as its owner.
func (h *Host) Listen(ctx context.Context, addr string) (net.Listener, error) {
	return h.listen(ctx, addr)
}

func (h *Host) listen(ctx context.Context, addr string) (*listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("faultnet: %s listens on %q: %w", h.name, addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("faultnet: %s listens on %q: only loopback addresses are carried", h.name, addr)
	}
	var lc net.ListenConfig
	raw, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &listener{sb: h.sb, owner: h.name, raw: raw.(*net.TCPListener), addr: raw.Addr().String(),
		accepted: make(chan *conn), done: make(chan struct{}), shaking: map[*net.TCPConn]struct{}{}}
	if err := h.sb.register(l.addr, h.name); err != nil {
		raw.Close()
		return nil, err
	}
	h.sb.mu.Lock()
	if h.sb.closed {
		h.sb.mu.Unlock()
		h.sb.unregister(l.addr, h.name)
		raw.Close()
		return nil, ErrClosed
	}
	h.sb.lns[l] = struct{}{}
	h.sb.mu.Unlock()
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Dial opens a stream from the node to addr. Across a cut it blocks, as a
// SYN nobody answers does, until ctx ends or the cut heals; otherwise it
// takes the link's round trip, and a second more for every lost SYN.
func (h *Host) Dial(ctx context.Context, addr string) (net.Conn, error) {
	sb := h.sb
	to := sb.ownerOf(addr)
	fail := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: tcpAddr(addr), Err: err}
	}
	if sb.cut(h.name, to) || sb.cut(to, h.name) {
		sb.stats.DialsBlocked.Add(1)
	}
	for {
		w := sb.watch()
		if !sb.cut(h.name, to) && !sb.cut(to, h.name) {
			break
		}
		select {
		case <-w:
		case <-ctx.Done():
			return nil, fail(fmt.Errorf("no answer from %s across the partition: %w", nameOr(to), ctx.Err()))
		case <-sb.done:
			return nil, fail(ErrClosed)
		}
	}
	there, p := sb.linkState(h.name, to)
	back, _ := sb.linkState(to, h.name)
	wait := there + back
	rto := synRTO
	for range maxRetransmits {
		if !sb.chance(p) {
			break
		}
		sb.stats.Retransmits.Add(1)
		wait += rto
		rto *= 2
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fail(ctx.Err())
		case <-sb.done:
			t.Stop()
			return nil, fail(ErrClosed)
		}
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := writeHello(raw, h.name); err != nil {
		raw.Close()
		return nil, fail(err)
	}
	c, err := newConn(sb, raw.(*net.TCPConn), nil, h.name, to)
	if err != nil {
		return nil, fail(err)
	}
	sb.stats.Dials.Add(1)
	return c, nil
}

func nameOr(node string) string {
	if node == "" {
		return "an unknown node"
	}
	return node
}

func tcpAddr(addr string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil
	}
	return a
}

// listener accepts streams for one node. Each accepted socket first names
// the node that dialed it; the stream it becomes writes back over the link
// from this node to that one.
type listener struct {
	sb    *Switchboard
	owner string
	raw   *net.TCPListener
	addr  string

	accepted  chan *conn
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop and handshakes

	mu      sync.Mutex
	shaking map[*net.TCPConn]struct{} // sockets still naming their dialer
}

func (l *listener) acceptLoop() {
	defer l.wg.Done()
	for {
		raw, err := l.raw.AcceptTCP()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			raw.Close()
			return
		default:
		}
		l.shaking[raw] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.handshake(raw)
	}
}

// handshake learns who dialed raw and hands the stream to Accept.
func (l *listener) handshake(raw *net.TCPConn) {
	defer l.wg.Done()
	_ = raw.SetReadDeadline(time.Now().Add(handshakeTimeout))
	from, r, err := readHello(raw)
	l.mu.Lock()
	delete(l.shaking, raw)
	l.mu.Unlock()
	if err != nil {
		raw.Close()
		return
	}
	_ = raw.SetReadDeadline(time.Time{})
	c, err := newConn(l.sb, raw, r, l.owner, from)
	if err != nil {
		return
	}
	select {
	case l.accepted <- c:
	case <-l.done:
		c.abort()
	}
}

// Accept returns the next stream dialed to the listener.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.done:
		return nil, errListenerClosed
	}
}

// Close stops accepting and forgets the owner of the address.
func (l *listener) Close() error {
	err := errListenerClosed
	l.closeOnce.Do(func() {
		l.mu.Lock()
		close(l.done)
		for raw := range l.shaking {
			raw.Close() // ends its handshake
		}
		l.mu.Unlock()
		err = l.raw.Close()
		l.wg.Wait()
		l.sb.unregister(l.addr, l.owner)
		l.sb.mu.Lock()
		delete(l.sb.lns, l)
		l.sb.mu.Unlock()
	})
	return err
}

// Addr returns the address the listener is bound to.
func (l *listener) Addr() net.Addr { return l.raw.Addr() }

// Gossip returns a memberlist transport for the node bound to addr (on
// loopback; port 0 picks a free one): packets travel in memory through the
// switchboard, streams over its TCP.
func (h *Host) Gossip(addr string) (memberlist.Transport, error) {
	lis, err := h.listen(context.Background(), addr)
	if err != nil {
		return nil, err
	}
	t := newGossipTransport(h, lis)
	h.sb.mu.Lock()
	if h.sb.closed {
		h.sb.mu.Unlock()
		lis.Close()
		return nil, ErrClosed
	}
	h.sb.gossip[lis.addr] = t
	h.sb.mu.Unlock()
	t.wg.Add(1)
	go t.acceptLoop()
	return t, nil
}
