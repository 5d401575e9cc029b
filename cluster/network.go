package cluster

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
)

// Network carries a node's traffic: the streams of its gRPC server, its
// peer connections and its Raft transport, and its gossip. Config.Network
// nil (the default) is the host's TCP and UDP; the fault tests in
// chaos/faultnet supply one that partitions, drops and delays.
type Network interface {
	// Listen opens a stream listener on addr (HOST:PORT; port 0 picks a
	// free one) for the gRPC server or the Raft transport.
	Listen(ctx context.Context, addr string) (net.Listener, error)
	// Dial opens a stream to addr, a peer's gRPC or Raft address.
	Dial(ctx context.Context, addr string) (net.Conn, error)
	// Gossip returns memberlist's transport bound to addr. memberlist owns
	// it from then on and shuts it down when the node leaves.
	Gossip(addr string) (memberlist.Transport, error)
}

// hostNetwork is the host's own TCP; gossip is memberlist's own transport.
type hostNetwork struct{}

func (hostNetwork) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

func (hostNetwork) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Gossip returns nil: memberlist then builds its own UDP and TCP transport
// from the bind address.
func (hostNetwork) Gossip(string) (memberlist.Transport, error) { return nil, nil }

// network returns the node's network.
func (n *Node) network() Network {
	if n.cfg.Network != nil {
		return n.cfg.Network
	}
	return hostNetwork{}
}

// dialTimeout dials addr on network within timeout.
func dialTimeout(network Network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return network.Dial(ctx, addr)
}
