package faultnet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// packetQueue is how many packets wait for a node's memberlist before more
// are dropped, like a socket's receive buffer.
const packetQueue = 4096

// gossipTransport is memberlist's transport for one node: packets travel in
// memory through the switchboard, addressed by the host and port of the
// node's gossip listener; streams are the switchboard's TCP streams.
type gossipTransport struct {
	host *Host
	lis  *listener
	addr *net.TCPAddr
	from *net.UDPAddr // what receivers see as a packet's source

	packets chan *memberlist.Packet
	streams chan net.Conn

	once sync.Once
	done chan struct{}
	wg   sync.WaitGroup // the accept loop
}

var _ memberlist.Transport = (*gossipTransport)(nil)

func newGossipTransport(h *Host, lis *listener) *gossipTransport {
	addr := lis.raw.Addr().(*net.TCPAddr)
	return &gossipTransport{host: h, lis: lis, addr: addr, from: &net.UDPAddr{IP: addr.IP, Port: addr.Port},
		packets: make(chan *memberlist.Packet, packetQueue), streams: make(chan net.Conn), done: make(chan struct{})}
}

// FinalAdvertiseAddr returns the address given, or else the one bound.
func (t *gossipTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip == "" {
		return t.addr.IP, t.addr.Port, nil
	}
	adv := net.ParseIP(ip)
	if adv == nil {
		return nil, 0, fmt.Errorf("faultnet: %s: advertise address %q is not an IP", t.host.name, ip)
	}
	if v4 := adv.To4(); v4 != nil {
		adv = v4
	}
	return adv, port, nil
}

// WriteTo sends a packet to addr. Like UDP, it reports no loss.
func (t *gossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.host.sb.sendPacket(t, b, addr)
	return time.Now(), nil
}

// PacketCh delivers packets sent to the node.
func (t *gossipTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout opens a stream to addr within timeout.
func (t *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return t.host.Dial(ctx, addr)
}

// StreamCh delivers streams dialed to the node.
func (t *gossipTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown stops receiving and closes the listener.
func (t *gossipTransport) Shutdown() error {
	var err error
	t.once.Do(func() {
		sb := t.host.sb
		sb.mu.Lock()
		if sb.gossip[t.lis.addr] == t {
			delete(sb.gossip, t.lis.addr)
		}
		sb.mu.Unlock()
		close(t.done)
		if cerr := t.lis.Close(); cerr != errListenerClosed {
			err = cerr
		}
		t.wg.Wait()
	})
	return err
}

func (t *gossipTransport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.lis.Accept()
		if err != nil {
			return
		}
		select {
		case t.streams <- c:
		case <-t.done:
			c.Close()
			return
		}
	}
}

// deliver hands p to the node's memberlist, or drops it when the node's
// queue is full or it has shut down.
func (t *gossipTransport) deliver(p *memberlist.Packet, stats *Stats) {
	p.Timestamp = time.Now()
	select {
	case <-t.done:
		stats.PacketsLost.Add(1)
		return
	default:
	}
	select {
	case t.packets <- p:
		stats.PacketsDelivered.Add(1)
	default:
		stats.PacketsLost.Add(1)
	}
}

// sendPacket carries one packet from src to addr: it is dropped across a
// cut, lost with the link's drop rate, and held for the link's delay.
func (sb *Switchboard) sendPacket(src *gossipTransport, b []byte, addr string) {
	sb.stats.PacketsSent.Add(1)
	sb.mu.RLock()
	dst := sb.gossip[addr]
	closed := sb.closed
	sb.mu.RUnlock()
	if dst == nil || closed {
		sb.stats.PacketsLost.Add(1) // nobody listens there
		return
	}
	from, to := src.host.name, dst.host.name
	if sb.cut(from, to) {
		sb.stats.PacketsCut.Add(1)
		return
	}
	delay, p := sb.linkState(from, to)
	if sb.chance(p) {
		sb.stats.PacketsDropped.Add(1)
		return
	}
	pkt := &memberlist.Packet{Buf: bytes.Clone(b), From: src.from}
	if delay <= 0 {
		dst.deliver(pkt, &sb.stats)
		return
	}
	sb.packets.add(time.Now().Add(delay), dst, pkt)
}
