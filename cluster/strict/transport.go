package strict

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// listen opens the Raft TCP transport on the gRPC host, on RaftAddr's port
// or a free one.
func (g *strictGroup) listen() error {
	e := g.e
	bind := e.set.RaftAddr
	if bind == "" {
		host, _, err := net.SplitHostPort(e.h.GRPCAddr())
		if err != nil {
			return fmt.Errorf("sluice: raft address: %w", err)
		}
		bind = net.JoinHostPort(host, "0")
	}
	lis, err := e.h.ListenRaft(context.Background(), bind)
	if err != nil {
		return fmt.Errorf("sluice: raft_addr: %w", err)
	}
	advertise := lis.Addr()
	if e.set.RaftAdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", e.set.RaftAdvertiseAddr)
		if err != nil {
			lis.Close()
			return fmt.Errorf("sluice: raft_advertise_addr: %w", err)
		}
		advertise = a
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &raftStream{lis: lis, advertise: advertise, dial: e.h.DialRaft},
		MaxPool: 8, Timeout: 2 * time.Second, Logger: newRaftLogger(e.log),
		// No pipelining: hashicorp/raft's pipeline can deadlock after a
		// stale-term answer (a replication goroutine parked on a response
		// no one reads), which stalls a follower and hangs Shutdown. Group
		// commit already packs many checks into each entry, so one append
		// in flight per follower costs little.
		MaxRPCsInFlight: 1,
		// Voters are dialled where gossip says they are now, not where the
		// log last recorded them: a voter restarted on another port (the
		// default picks a free one) is reachable before a leader exists to
		// record its new address, as after a whole-fleet restart.
		ServerAddressProvider: gossipRaftAddrs{g},
	})
	g.trans, g.closer, g.addr = trans, transportCloser{trans}, advertise.String()
	return nil
}

// transportCloser closes a NetworkTransport with its connections: its Close
// alone stops the listener only, and each pooled or accepted connection
// would keep a goroutine and its buffers (a quarter MiB) until the other
// end went away.
type transportCloser struct{ t *raft.NetworkTransport }

func (c transportCloser) Close() error {
	c.t.CloseStreams()
	return c.t.Close()
}

// raftStream is raft's StreamLayer over a listener of the node's network,
// with the node's TLS when it has one: the node's, not strict mode's, for
// it holds the certificates.
type raftStream struct {
	lis       net.Listener
	advertise net.Addr
	dial      func(ctx context.Context, addr string) (net.Conn, error) // on the node's network

	mu       sync.Mutex
	accepted map[*acceptedConn]struct{} // open until closed here or by raft
	closed   bool
}

// Accept returns the next peer connection, which Close closes with the
// listener: raft's handler for it would otherwise outlive the transport.
func (s *raftStream) Accept() (net.Conn, error) {
	c, err := s.lis.Accept()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	if s.accepted == nil {
		s.accepted = make(map[*acceptedConn]struct{})
	}
	ac := &acceptedConn{Conn: c, s: s}
	s.accepted[ac] = struct{}{}
	return ac, nil
}

// Close stops the listener and closes every connection it accepted.
func (s *raftStream) Close() error {
	err := s.lis.Close()
	s.mu.Lock()
	s.closed = true
	open := s.accepted
	s.accepted = nil
	s.mu.Unlock()
	for c := range open {
		c.Conn.Close()
	}
	return err
}

func (s *raftStream) Addr() net.Addr { return s.advertise }
func (s *raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, string(address))
}

// acceptedConn is a connection raftStream accepted, forgotten when closed.
type acceptedConn struct {
	net.Conn
	s *raftStream
}

func (c *acceptedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.accepted, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// gossipRaftAddrs finds a voter's Raft address in its gossiped metadata.
type gossipRaftAddrs struct{ g *strictGroup }

func (a gossipRaftAddrs) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if id == a.g.id {
		return raft.ServerAddress(a.g.addr), nil
	}
	for _, p := range a.g.e.h.Peers() {
		if p.RaftID == string(id) && p.RaftAddr != "" {
			return raft.ServerAddress(p.RaftAddr), nil
		}
	}
	return "", fmt.Errorf("no live member %q with a raft address", id)
}
