package faultnet

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Stream tuning.
const (
	// sendQueue bounds the bytes a stream holds undelivered before Write
	// blocks, like a socket's send buffer.
	sendQueue = 4 << 20
	// minRTO is the least retransmission timeout of a lost segment, as in
	// Linux; the round trip is added to it.
	minRTO = 200 * time.Millisecond
	// maxRetransmits bounds how often one segment is lost in a row.
	maxRetransmits = 6
	// handshakeTimeout bounds how long an accepted stream may take to name
	// the node that dialed it.
	handshakeTimeout = 10 * time.Second
)

// conn is one end of a stream between two nodes. Reads come straight from
// the loopback socket. Writes are queued, and a pump delivers them to the
// socket in order when the link from → to allows: after its delay and
// retransmissions, and not while it is cut.
type conn struct {
	sb       *Switchboard
	raw      *net.TCPConn
	r        io.Reader // raw, or a reader holding bytes peeked at accept
	from, to string

	mu      sync.Mutex
	queue   []chunk
	queued  int
	last    time.Time // delivery time of the last chunk queued: TCP keeps order
	closed  bool      // closed by its user; the pump still flushes the queue
	broken  error     // the socket failed under the pump
	wdl     time.Time // write deadline
	changed chan struct{}

	abortOnce sync.Once
	aborted   chan struct{} // closed to stop the pump at once
}

// chunk is one write, due at the peer at at.
type chunk struct {
	data []byte
	at   time.Time
}

// newConn wraps raw as the end of node from towards node to and starts its
// pump.
func newConn(sb *Switchboard, raw *net.TCPConn, r io.Reader, from, to string) (*conn, error) {
	if r == nil {
		r = raw
	}
	c := &conn{sb: sb, raw: raw, r: r, from: from, to: to, changed: make(chan struct{}), aborted: make(chan struct{})}
	sb.mu.Lock()
	if sb.closed {
		sb.mu.Unlock()
		raw.Close()
		return nil, ErrClosed
	}
	sb.conns[c] = struct{}{}
	sb.wg.Add(1)
	sb.mu.Unlock()
	go c.pump()
	return c, nil
}

// Read reads from the socket.
func (c *conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0, c.opErr("read", net.ErrClosed)
	}
	return c.r.Read(b)
}

// Write queues b for the peer. It blocks only while the queue is full, until
// the write deadline.
func (c *conn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return 0, c.opErr("write", net.ErrClosed)
		case c.broken != nil:
			err := c.broken
			c.mu.Unlock()
			return 0, c.opErr("write", err)
		case !c.wdl.IsZero() && !time.Now().Before(c.wdl):
			c.mu.Unlock()
			return 0, c.opErr("write", os.ErrDeadlineExceeded)
		case c.queued < sendQueue:
			at := c.sb.deliverAt(c.from, c.to, time.Now())
			if at.Before(c.last) {
				at = c.last
			}
			c.last = at
			c.queue = append(c.queue, chunk{data: bytes.Clone(b), at: at})
			c.queued += len(b)
			c.signal()
			c.mu.Unlock()
			return len(b), nil
		}
		ch, dl := c.changed, c.wdl
		c.mu.Unlock()
		if !c.wait(ch, dl) {
			return 0, c.opErr("write", net.ErrClosed)
		}
	}
}

// wait waits for a change of the stream or the deadline dl (zero: none);
// false when the switchboard closed.
func (c *conn) wait(ch <-chan struct{}, dl time.Time) bool {
	var timeout <-chan time.Time
	if !dl.IsZero() {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
	case <-timeout:
	case <-c.aborted:
		return false
	case <-c.sb.done:
		return false
	}
	return true
}

// signal wakes everything waiting on the stream; c.mu is held.
func (c *conn) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Close closes the stream for its user at once. What it wrote still
// reaches the peer, as TCP delivers a socket's send buffer after close, and
// then the peer reads EOF; across a cut, that waits for the heal.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	c.closed = true
	c.signal()
	c.mu.Unlock()
	// Unblock this end's readers; the pump closes the socket once flushed.
	_ = c.raw.CloseRead()
	return nil
}

// abort drops the queue and closes the socket now.
func (c *conn) abort() {
	c.abortOnce.Do(func() {
		close(c.aborted)
		_ = c.raw.Close()
	})
}

// pump delivers queued writes to the socket, each when it is due and the
// link is up, and closes the socket once the user has closed the stream and
// the queue is empty.
func (c *conn) pump() {
	defer c.sb.wg.Done()
	defer func() {
		c.abort()
		c.sb.mu.Lock()
		delete(c.sb.conns, c)
		c.sb.mu.Unlock()
	}()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			if c.closed {
				c.mu.Unlock()
				return
			}
			ch := c.changed
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-c.aborted:
				return
			case <-c.sb.done:
				return
			}
		}
		head := c.queue[0]
		c.mu.Unlock()
		if !c.sleepUntil(head.at) || !c.sb.waitLink(c.from, c.to, c.aborted) {
			return
		}
		_, err := c.raw.Write(head.data)
		c.mu.Lock()
		if err != nil {
			c.broken = err
			c.signal()
			c.mu.Unlock()
			return
		}
		c.queue[0] = chunk{}
		c.queue = c.queue[1:]
		c.queued -= len(head.data)
		c.signal()
		c.mu.Unlock()
	}
}

// sleepUntil waits until at; false when the stream or switchboard stops.
func (c *conn) sleepUntil(at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.aborted:
		return false
	case <-c.sb.done:
		return false
	}
}

func (c *conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.raw.LocalAddr(), Addr: c.raw.RemoteAddr(), Err: err}
}

// LocalAddr returns the socket's local address.
func (c *conn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// RemoteAddr returns the socket's remote address.
func (c *conn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *conn) SetDeadline(t time.Time) error {
	if err := c.raw.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the socket's read deadline.
func (c *conn) SetReadDeadline(t time.Time) error { return c.raw.SetReadDeadline(t) }

// SetWriteDeadline bounds how long a Write may wait for room in the queue.
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wdl = t
	c.signal()
	return nil
}

// deliverAt returns when bytes written at now from → to reach the peer: the
// link's delay, plus a retransmission timeout for every time the segment is
// lost (200 ms plus the round trip, doubling), as TCP makes of loss.
func (sb *Switchboard) deliverAt(from, to string, now time.Time) time.Time {
	delay, p := sb.linkState(from, to)
	at := now.Add(delay)
	if p > 0 {
		back, _ := sb.linkState(to, from)
		rto := minRTO + delay + back
		for range maxRetransmits {
			if !sb.chance(p) {
				break
			}
			sb.stats.Retransmits.Add(1)
			at = at.Add(rto)
			rto *= 2
		}
	}
	return at
}

// waitLink waits until from can reach to; false when cancel or the
// switchboard closes first.
func (sb *Switchboard) waitLink(from, to string, cancel <-chan struct{}) bool {
	for {
		w := sb.watch()
		if !sb.cut(from, to) {
			return true
		}
		select {
		case <-w:
		case <-cancel:
			return false
		case <-sb.done:
			return false
		}
	}
}

// hello is what a dialing node writes first on a stream, before its name:
// the accepting side learns from it who dialed.
const hello = "faultnet\x00"

// writeHello names the dialing node on a new socket.
func writeHello(raw net.Conn, name string) error {
	if len(name) > 255 {
		return fmt.Errorf("faultnet: node name %q is longer than 255 bytes", name)
	}
	_, err := raw.Write(append(append([]byte(hello), byte(len(name))), name...))
	return err
}

// readHello reads the dialing node's name from a new socket. A stream from
// outside the switchboard has none: its bytes are kept for its reader and
// the source is "".
func readHello(raw net.Conn) (string, io.Reader, error) {
	br := bufio.NewReader(raw)
	head, err := br.Peek(len(hello))
	if err != nil || string(head) != hello {
		if len(head) > 0 && err == io.EOF {
			err = nil
		}
		return "", br, err
	}
	_, _ = br.Discard(len(hello))
	n, err := br.ReadByte()
	if err != nil {
		return "", nil, err
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(br, name); err != nil {
		return "", nil, err
	}
	if br.Buffered() == 0 {
		return string(name), raw, nil
	}
	return string(name), br, nil
}
