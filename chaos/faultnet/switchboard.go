package faultnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// ErrClosed is returned by operations on a closed switchboard.
var ErrClosed = errors.New("faultnet: switchboard is closed")

// Switchboard carries the traffic of a set of nodes and applies the faults
// a test sets: partitions, packet loss, delay and clock skew. Its methods
// are safe to call concurrently while traffic flows.
type Switchboard struct {
	seed int64

	mu      sync.RWMutex
	groups  map[string]int // partition: node → group; nil when there is none
	drop    map[link]float64
	delay   map[link]time.Duration
	changed chan struct{} // closed and replaced whenever the links change
	owners  map[string]string
	gossip  map[string]*gossipTransport
	hosts   map[string]*Host
	lns     map[*listener]struct{}
	conns   map[*conn]struct{}
	closed  bool

	rngMu sync.Mutex
	rng   *rand.Rand

	clocks clocks

	stats Stats

	done    chan struct{} // closed by Close
	packets *scheduler
	wg      sync.WaitGroup // every goroutine the switchboard started
}

// link is one direction between two nodes.
type link struct{ from, to string }

// New returns a switchboard whose random choices are drawn from seed.
func New(seed int64) *Switchboard {
	sb := &Switchboard{
		seed:    seed,
		drop:    map[link]float64{},
		delay:   map[link]time.Duration{},
		changed: make(chan struct{}),
		owners:  map[string]string{},
		gossip:  map[string]*gossipTransport{},
		hosts:   map[string]*Host{},
		lns:     map[*listener]struct{}{},
		conns:   map[*conn]struct{}{},
		rng:     rand.New(rand.NewPCG(uint64(seed), 0x5eed)),
		clocks:  newClocks(),
		done:    make(chan struct{}),
	}
	sb.packets = newScheduler(sb)
	sb.wg.Add(1)
	go func() {
		defer sb.wg.Done()
		sb.packets.run(sb.done)
	}()
	return sb
}

// Seed returns the seed the switchboard was made with.
func (sb *Switchboard) Seed() int64 { return sb.seed }

// Node returns the named node's view of the switchboard: the network to put
// in its cluster.Config. Every call with the same name returns the same
// view, so a restarted node keeps its place in partitions and faults.
func (sb *Switchboard) Node(name string) *Host {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	h := sb.hosts[name]
	if h == nil {
		h = &Host{sb: sb, name: name}
		sb.hosts[name] = h
	}
	return h
}

// Partition splits the nodes into groups that cannot reach each other.
// A node named in no group is alone: it reaches nobody, and nobody it. A
// node named twice stays in the first group that names it. Partition
// replaces any earlier partition; drops and delays stay.
func (sb *Switchboard) Partition(groups ...[]string) {
	g := map[string]int{}
	for i, group := range groups {
		for _, name := range group {
			if _, ok := g[name]; !ok {
				g[name] = i
			}
		}
	}
	sb.update(func() { sb.groups = g })
}

// Heal clears the partition, every drop and every delay. Clock skews stay.
func (sb *Switchboard) Heal() {
	sb.update(func() {
		sb.groups = nil
		clear(sb.drop)
		clear(sb.delay)
	})
}

// Drop loses fraction p (0 … 1) of what from sends to to: gossip packets
// are dropped, stream segments are retransmitted after a timeout. p = 0
// clears it.
func (sb *Switchboard) Drop(from, to string, p float64) {
	p = min(max(p, 0), 1)
	sb.update(func() {
		if p == 0 {
			delete(sb.drop, link{from, to})
			return
		}
		sb.drop[link{from, to}] = p
	})
}

// Delay holds everything from sends to to for d before it arrives: gossip
// packets and stream writes alike. d = 0 clears it.
func (sb *Switchboard) Delay(from, to string, d time.Duration) {
	sb.update(func() {
		if d <= 0 {
			delete(sb.delay, link{from, to})
			return
		}
		sb.delay[link{from, to}] = d
	})
}

// update changes the links under the lock and wakes every stream and dial
// waiting on them.
func (sb *Switchboard) update(change func()) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	change()
	close(sb.changed)
	sb.changed = make(chan struct{})
}

// watch returns a channel closed at the next change of the links.
func (sb *Switchboard) watch() <-chan struct{} {
	sb.mu.RLock()
	defer sb.mu.RUnlock()
	return sb.changed
}

// cut reports whether from cannot reach to. Traffic from or to a source the
// switchboard does not know (an address no node listens on) is never cut.
func (sb *Switchboard) cut(from, to string) bool {
	sb.mu.RLock()
	defer sb.mu.RUnlock()
	return sb.cutLocked(from, to)
}

func (sb *Switchboard) cutLocked(from, to string) bool {
	if sb.groups == nil || from == "" || to == "" || from == to {
		return false
	}
	gf, okf := sb.groups[from]
	gt, okt := sb.groups[to]
	return !okf || !okt || gf != gt
}

// Cut reports whether, under the current partition, from cannot reach to.
func (sb *Switchboard) Cut(from, to string) bool { return sb.cut(from, to) }

// linkState returns the link's one-way delay and loss.
func (sb *Switchboard) linkState(from, to string) (time.Duration, float64) {
	sb.mu.RLock()
	defer sb.mu.RUnlock()
	l := link{from, to}
	return sb.delay[l], sb.drop[l]
}

// chance returns true with probability p, from the seeded source.
func (sb *Switchboard) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	sb.rngMu.Lock()
	defer sb.rngMu.Unlock()
	return sb.rng.Float64() < p
}

// ownerOf names the node listening on addr, or "".
func (sb *Switchboard) ownerOf(addr string) string {
	sb.mu.RLock()
	defer sb.mu.RUnlock()
	return sb.owners[addr]
}

// Owner names the node that listens on addr (a stream listener or a gossip
// transport), or "" when none does.
func (sb *Switchboard) Owner(addr string) string { return sb.ownerOf(addr) }

// Close stops all traffic and releases every listener, stream and goroutine
// the switchboard started. Nodes still running see their sockets close.
func (sb *Switchboard) Close() error {
	sb.mu.Lock()
	if sb.closed {
		sb.mu.Unlock()
		return nil
	}
	sb.closed = true
	close(sb.done)
	lns := make([]*listener, 0, len(sb.lns))
	for l := range sb.lns {
		lns = append(lns, l)
	}
	conns := make([]*conn, 0, len(sb.conns))
	for c := range sb.conns {
		conns = append(conns, c)
	}
	gts := make([]*gossipTransport, 0, len(sb.gossip))
	for _, g := range sb.gossip {
		gts = append(gts, g)
	}
	sb.mu.Unlock()
	var errs []error
	for _, g := range gts {
		errs = append(errs, g.Shutdown())
	}
	for _, l := range lns {
		if err := l.Close(); err != nil && !errors.Is(err, errListenerClosed) {
			errs = append(errs, err)
		}
	}
	for _, c := range conns {
		c.abort()
	}
	sb.wg.Wait()
	return errors.Join(errs...)
}

// isClosed reports whether Close has begun.
func (sb *Switchboard) isClosed() bool {
	select {
	case <-sb.done:
		return true
	default:
		return false
	}
}

// register records that name owns addr.
func (sb *Switchboard) register(addr, name string) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.closed {
		return ErrClosed
	}
	if o, ok := sb.owners[addr]; ok && o != name {
		// The port is free to the kernel but not yet to the switchboard
		// (its last owner is closing): in use all the same.
		return fmt.Errorf("faultnet: %s is already owned by %s, not %s: %w", addr, o, name, syscall.EADDRINUSE)
	}
	sb.owners[addr] = name
	return nil
}

// unregister forgets that name owns addr; a new owner is left alone.
func (sb *Switchboard) unregister(addr, name string) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.owners[addr] == name {
		delete(sb.owners, addr)
	}
}
