package cluster

import (
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Defaults for healing the fleet after failures.
const (
	defaultReconnectInterval = 5 * time.Second
	defaultReconnectTimeout  = 24 * time.Hour
)

// reconnector remembers members that failed and retries them and the seeds,
// as Serf does: memberlist forgets a member that stayed unreachable past its
// failure timeout and never contacts it again by itself, so without this a
// split fleet would stay split and a restarted seed would serve alone.
type reconnector struct {
	mu     sync.Mutex
	failed map[string]failedMember // by member name
}

// failedMember is a member memberlist reported gone, and where it was.
type failedMember struct {
	gossip string
	meta   []byte // its last gossiped metadata
	since  time.Time
}

func newReconnector() *reconnector { return &reconnector{failed: map[string]failedMember{}} }

// lost records a member memberlist no longer lists. A member that left on
// purpose is retried too: gossip does not say which it was, and a refused
// connection costs little.
func (r *reconnector) lost(name, gossip string, meta []byte, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed[name] = failedMember{gossip: gossip, meta: meta, since: now}
}

// back forgets a member that is alive again.
func (r *reconnector) back(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failed, name)
}

// isFailed reports whether name is waiting to be reconnected.
func (r *reconnector) isFailed(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.failed[name]
	return ok
}

// failedMember returns the member named name if it is waiting to be
// reconnected.
func (r *reconnector) failedMember(name string) (failedMember, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failed[name]
	return f, ok
}

// failedMembers returns the members waiting to be reconnected, by name.
func (r *reconnector) failedMembers() map[string]failedMember {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]failedMember, len(r.failed))
	for k, v := range r.failed {
		out[k] = v
	}
	return out
}

// pick drops members failed for longer than timeout and returns the address
// of one of the rest, at random, or "".
func (r *reconnector) pick(now time.Time, timeout time.Duration, rng *rand.Rand) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var addrs []string
	for name, f := range r.failed {
		if now.Sub(f.since) > timeout {
			delete(r.failed, name)
			continue
		}
		addrs = append(addrs, f.gossip)
	}
	if len(addrs) == 0 {
		return ""
	}
	return addrs[rng.IntN(len(addrs))]
}

// reconnectLoop, every ReconnectInterval, joins the seeds that are not
// members now and one failed member at random. One answer is enough to
// merge two sides: memberlist then exchanges their whole member lists.
func (m *membership) reconnectLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(m.n.self.Boot, uint64(time.Now().UnixNano())))
	every := m.n.cfg.ReconnectInterval
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		// Jitter keeps a fleet that failed together from retrying together.
		timer.Reset(every/2 + rand.N(every))
		select {
		case <-ctx.Done():
			return
		case addr := <-m.restarted:
			m.rejoin(addr)
			continue
		case <-timer.C:
		}
		var try []string
		live := m.gossipAddrs()
		for _, s := range resolveSeeds(ctx, m.n.cfg.Join, m.n.log) {
			if !live[s] && s != m.addr() {
				try = append(try, s)
			}
		}
		if a := m.reconnect.pick(time.Now(), m.n.cfg.ReconnectTimeout, rng); a != "" && !live[a] && !slices.Contains(try, a) {
			try = append(try, a)
		}
		if len(try) == 0 {
			continue
		}
		joined, err := m.ml.Join(try)
		if joined > 0 {
			m.n.metrics.Reconnects.Add(1)
			m.n.log.Info("reconnected", "contacted", joined, "tried", try)
			m.signal()
		} else if !m.joinRefused(err, try) && err != nil {
			m.n.log.Debug("reconnect failed", "tried", try, "err", err)
		}
	}
}

// gossipAddrs returns the gossip addresses of the members known alive.
func (m *membership) gossipAddrs() map[string]bool {
	out := map[string]bool{}
	for _, c := range m.members() {
		out[c.gossip] = true
		if host, port, err := net.SplitHostPort(c.gossip); err == nil {
			if ip := net.ParseIP(host); ip != nil {
				out[net.JoinHostPort(ip.String(), port)] = true
			}
		}
	}
	return out
}

// gossipAddr formats a member's gossip address.
func gossipAddr(ip net.IP, port uint16) string {
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}

// addrString is a net.Addr of a HOST:PORT string, for memberlist's Ping.
type addrString string

func (a addrString) Network() string { return "udp" }
func (a addrString) String() string  { return string(a) }

// maxProbes bounds the pings one members listing sends at once.
const maxProbes = 16

// unreachable pings each member directly and returns the names of those
// that did not answer within memberlist's probe timeout: the members this
// node would now suspect. Each ping is bounded by that timeout.
func (m *membership) unreachable(ctx context.Context, members []memberCopy) map[string]bool {
	out := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxProbes)
	for _, c := range members {
		if c.name == m.n.cfg.Name {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return out
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if _, err := m.ml.Ping(c.name, addrString(c.gossip)); err != nil {
				mu.Lock()
				out[c.name] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}
