package strict

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/cluster"
)

// stallNet is a test Network on loopback TCP that can cut nodes off the way
// a dropping firewall does: a write across the cut blocks until the cut
// heals or the connection closes, and a dial across it waits out its
// context. Gossip stays on memberlist's own transport, so the cut node
// still looks alive: only its streams stall.
type stallNet struct {
	mu     sync.Mutex
	owner  map[string]string // listener address → node name
	cut    map[string]bool   // node names cut off from every other node
	healed chan struct{}     // closed and replaced by every heal
}

func newStallNet() *stallNet {
	return &stallNet{owner: map[string]string{}, cut: map[string]bool{}, healed: make(chan struct{})}
}

// node returns the network as node name sees it.
func (s *stallNet) node(name string) cluster.Network { return &stallView{s: s, name: name} }

// isolate cuts name off from every other node.
func (s *stallNet) isolate(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut[name] = true
}

// heal removes every cut.
func (s *stallNet) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.cut)
	close(s.healed)
	s.healed = make(chan struct{})
}

// blocked reports whether traffic between a and the owner of addr is cut,
// and the channel that closes at the next heal.
func (s *stallNet) blocked(a, addr string) (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.owner[addr]
	return a != b && (s.cut[a] || s.cut[b]), s.healed
}

type stallView struct {
	s    *stallNet
	name string
}

func (v *stallView) Listen(ctx context.Context, addr string) (net.Listener, error) {
	lis, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	v.s.mu.Lock()
	v.s.owner[lis.Addr().String()] = v.name
	v.s.mu.Unlock()
	return lis, nil
}

func (v *stallView) Dial(ctx context.Context, addr string) (net.Conn, error) {
	for {
		cut, healed := v.s.blocked(v.name, addr)
		if !cut {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-healed:
		}
	}
	c, err := new(net.Dialer).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, v: v, to: addr, closed: make(chan struct{})}, nil
}

func (v *stallView) Gossip(string) (memberlist.Transport, error) { return nil, nil }

// stallConn is a dialled stream whose writes wait while its ends are cut
// apart, until the cut heals, the connection closes or its write deadline
// passes, as a write into a full socket buffer would. Gating one
// direction's writes is enough: a request that cannot be written gets no
// answer.
type stallConn struct {
	net.Conn
	v         *stallView
	to        string
	closeOnce sync.Once
	closed    chan struct{}
	deadline  atomic.Int64 // write deadline, Unix nanoseconds; 0 for none
}

func (c *stallConn) Write(p []byte) (int, error) {
	for {
		cut, healed := c.v.s.blocked(c.v.name, c.to)
		if !cut {
			return c.Conn.Write(p)
		}
		var expired <-chan time.Time
		if d := c.deadline.Load(); d != 0 {
			timer := time.NewTimer(time.Until(time.Unix(0, d)))
			defer timer.Stop()
			expired = timer.C
		}
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		case <-healed:
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		}
	}
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) setWriteDeadline(t time.Time) {
	if t.IsZero() {
		c.deadline.Store(0)
		return
	}
	c.deadline.Store(t.UnixNano())
}

func (c *stallConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// release removes the cut around name alone.
func (s *stallNet) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cut, name)
	close(s.healed)
	s.healed = make(chan struct{})
}
