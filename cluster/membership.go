package cluster

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/cluster/internal/liblog"
	"github.com/sluicehq/sluice/counter"
)

// membership runs memberlist for the node: it gossips the node's metadata
// (gRPC address, incarnation, rules hash), finds peers and notices when they
// come, go or restart.
type membership struct {
	n        *Node
	ml       *memberlist.Memberlist
	grpcAddr string
	self     string        // the advertised gossip address
	changed  chan struct{} // coalesced "membership changed" signal

	metaMu sync.Mutex
	meta   []byte

	// known holds copies of the members memberlist told of. Its own member
	// list hands out nodes it goes on writing to, so they are copied in the
	// event callbacks, which memberlist runs under its lock.
	knownMu sync.Mutex
	known   map[string]memberCopy
	// grew is closed, and replaced, whenever a member is remembered: a
	// delta from a member gossip has yet to tell of waits on it (see
	// awaitSender).
	grew chan struct{}

	// keyring is memberlist's, nil when gossip is not encrypted; keysMu
	// serialises the changes of SetSecretKeys.
	keysMu  sync.Mutex
	keyring *memberlist.Keyring

	reconnect *reconnector
	// restarted carries the gossip address of a member that answered a
	// ping as another boot than gossip says it is (NotifyPingComplete).
	restarted chan string
}

// memberCopy is what the node keeps of a member.
type memberCopy struct {
	name   string
	gossip string
	meta   []byte
	// inc, rulesHash and grpcAddr are the member's incarnation, rules
	// hash and gRPC address, as its metadata gives them; hasMeta says
	// whether it did.
	inc       counter.Incarnation
	rulesHash uint64
	grpcAddr  string
	hasMeta   bool
}

func (m *membership) remember(n *memberlist.Node) {
	c := memberCopy{name: n.Name, gossip: gossipAddr(n.Addr, n.Port), meta: append([]byte(nil), n.Meta...)}
	if meta, err := decodeMeta(c.meta); err == nil {
		c.inc, c.rulesHash, c.grpcAddr, c.hasMeta = counter.Incarnation{Node: n.Name, Boot: meta.boot}, meta.rulesHash, meta.grpcAddr, true
	}
	m.knownMu.Lock()
	m.known[n.Name] = c
	close(m.grew)
	m.grew = make(chan struct{})
	m.knownMu.Unlock()
	m.reconnect.back(n.Name)
}

func (m *membership) forget(n *memberlist.Node) {
	m.knownMu.Lock()
	delete(m.known, n.Name)
	m.knownMu.Unlock()
	if n.Name != m.n.cfg.Name {
		m.reconnect.lost(n.Name, gossipAddr(n.Addr, n.Port), append([]byte(nil), n.Meta...), time.Now())
	}
}

// members returns copies of the members known to be alive, this node among
// them.
func (m *membership) members() []memberCopy {
	m.knownMu.Lock()
	defer m.knownMu.Unlock()
	out := make([]memberCopy, 0, len(m.known))
	for _, c := range m.known {
		out = append(out, c)
	}
	return out
}

// gossipAlive reports whether gossip holds member name alive: answering
// its failure detector's probes, directly or through other members, and
// not suspected of having failed.
func (m *membership) gossipAlive(name string) bool {
	for _, nd := range m.ml.Members() {
		if nd.Name == name {
			return nd.State == memberlist.StateAlive
		}
	}
	return false
}

// setMeta encodes the node's current metadata for gossip.
func (m *membership) setMeta() error {
	raftAddr, raftID := "", ""
	if m.n.strict != nil {
		raftAddr, raftID = m.n.strict.Member()
	}
	meta, err := nodeMeta{grpcAddr: m.grpcAddr, boot: m.n.self.Boot, rulesHash: m.n.rulesHash(), raftAddr: raftAddr,
		raftID: raftID}.encode()
	if err != nil {
		return fmt.Errorf("sluice: %w", err)
	}
	m.metaMu.Lock()
	m.meta = meta
	m.metaMu.Unlock()
	return nil
}

// updateMeta gossips changed metadata: new rules, or a strict group started
// by a reload.
func (m *membership) updateMeta() error {
	if err := m.setMeta(); err != nil {
		return err
	}
	return m.ml.UpdateNode(time.Second)
}

func newMembership(n *Node) (*membership, error) {
	m := &membership{n: n, changed: make(chan struct{}, 1), known: map[string]memberCopy{}, grew: make(chan struct{}),
		reconnect: newReconnector(), restarted: make(chan string, 1)}
	grpcAddr := n.cfg.GRPCAdvertiseAddr
	if grpcAddr == "" {
		var ok bool
		if grpcAddr, ok = advertisedGRPC(n.server.addr(), n.cfg.AdvertiseAddr, n.cfg.BindAddr, privateIP); !ok {
			n.log.Warn("GRPCAddr listens on every interface and nothing names a host to advertise: "+
				"peers are told the wildcard address and may fail to reach this node; set GRPCAdvertiseAddr, or give GRPCAddr a host",
				"grpc_addr", grpcAddr)
		}
	}
	m.grpcAddr = grpcAddr
	if err := m.setMeta(); err != nil {
		return nil, err
	}

	host, port, err := splitHostPort(n.cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("sluice: BindAddr: %w", err)
	}
	var mc *memberlist.Config
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		// One machine: probe and gossip fast, the network is not in the way.
		mc = memberlist.DefaultLocalConfig()
	} else {
		mc = memberlist.DefaultLANConfig()
	}
	mc.Name = n.cfg.Name
	mc.BindAddr, mc.BindPort = host, port
	if n.cfg.AdvertiseAddr != "" {
		ah, ap, err := splitHostPort(n.cfg.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("sluice: AdvertiseAddr: %w", err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	if n.cfg.Network != nil {
		t, err := n.cfg.Network.Gossip(n.cfg.BindAddr)
		if err != nil {
			return nil, fmt.Errorf("sluice: gossip on %s: %w", n.cfg.BindAddr, err)
		}
		mc.Transport = t
	}
	if err := n.cfg.keyring(mc); err != nil {
		return nil, err
	}
	mc.Delegate = m
	mc.Events = m
	mc.Ping = m
	// A restarted node may come back on another address under its name.
	mc.DeadNodeReclaimTime = time.Second
	mc.Logger = log.New(&liblog.Writer{Log: n.log.With("component", "memberlist"), QuietWarn: true, Closing: n.isClosing.Load,
		Observe: func(line string) {
			if gossipRefusal(line) {
				n.metrics.GossipRefusals.Add(1)
			}
		}}, "", 0)
	if n.cfg.GossipTuning != nil {
		n.cfg.GossipTuning(mc)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("sluice: gossip on %s: %w", n.cfg.BindAddr, err)
	}
	m.ml = ml
	// memberlist builds the keyring itself from a SecretKey that
	// GossipTuning set.
	m.keyring = mc.Keyring
	m.logKeys(mc)
	ln := ml.LocalNode()
	m.self = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	return m, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number in 0–65535", p)
	}
	return host, port, nil
}

// addr returns the gossip address the node advertises. It is read once at
// start: memberlist's own record of the node is gone after a shutdown.
func (m *membership) addr() string { return m.self }

// join tries the seeds until one answers or ctx ends, and reports whether
// one did; a node that cannot reach any seed keeps running alone and
// retries in run.
func (m *membership) join(ctx context.Context) bool {
	if len(m.n.cfg.Join) == 0 {
		return false
	}
	backoff := 100 * time.Millisecond
	for {
		seeds := resolveSeeds(ctx, m.n.cfg.Join, m.n.log)
		if len(seeds) > 0 {
			if joined, err := m.ml.Join(seeds); joined > 0 {
				m.n.log.Info("joined the cluster", "seeds", seeds, "contacted", joined)
				m.signal()
				return true
			} else if !m.joinRefused(err, seeds) && err != nil {
				m.n.log.Debug("join failed", "seeds", seeds, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			m.n.log.Warn("no seed answered; serving alone until one does", "join", m.n.cfg.Join)
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

// resolveSeeds expands dns:NAME:PORT seeds into one HOST:PORT per A/AAAA
// record.
func resolveSeeds(ctx context.Context, seeds []string, log *slog.Logger) []string {
	var out []string
	for _, s := range seeds {
		rest, ok := strings.CutPrefix(s, "dns:")
		if !ok {
			out = append(out, s)
			continue
		}
		name, port, err := net.SplitHostPort(rest)
		if err != nil {
			log.Warn("bad dns seed", "seed", s, "err", err)
			continue
		}
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, name)
		if err != nil {
			log.Debug("dns seed did not resolve", "seed", s, "err", err)
			continue
		}
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip.IP.String(), port))
		}
	}
	return out
}

// run refreshes the peer set whenever membership changes, and reconnects
// failed members and seeds until ctx ends.
func (m *membership) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.reconnectLoop(ctx)
	}()
	m.refresh()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
			m.refresh()
		}
	}
}

// refresh reads the member list into the peer set and checks for rule drift.
func (m *membership) refresh() {
	var live []peerInfo
	drift, total := 0, 0
	for _, node := range m.members() {
		if node.name == m.n.cfg.Name {
			continue
		}
		meta, err := decodeMeta(node.meta)
		if err != nil {
			m.n.log.Warn("ignoring a member with bad metadata", "member", node.name, "err", err)
			continue
		}
		total++
		if meta.rulesHash != m.n.rulesHash() {
			drift++
		}
		raftID := meta.raftID
		if raftID == "" {
			raftID = node.name
		}
		live = append(live, peerInfo{name: node.name, boot: meta.boot, grpcAddr: meta.grpcAddr, raftAddr: meta.raftAddr,
			raftID: raftID})
	}
	m.n.metrics.Members.Store(int64(total + 1))
	m.n.metrics.DriftedMembers.Store(int64(drift))
	if drift > 0 {
		if 2*drift > total+1 {
			m.n.log.Warn("this node's rules differ from the majority of the cluster", "differing_members", drift, "members", total+1)
		} else {
			m.n.log.Warn("some members' rules differ from this node's", "differing_members", drift, "members", total+1)
		}
	}
	m.n.peers.update(live)
}

func (m *membership) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// leave tells the cluster this node is leaving, and stops gossip. Telling
// is best effort: a node cut off from its peers, or too busy to send in
// time, cannot, and its peers then find it gone as they find a crashed
// node; that is no failure of the node's shutdown.
func (m *membership) leave() error {
	if err := m.ml.Leave(time.Second); err != nil {
		m.n.log.Warn("could not tell the cluster this node is leaving; its peers will find it gone", "err", err)
	}
	return m.ml.Shutdown()
}

func (m *membership) shutdown() { _ = m.ml.Shutdown() }

// memberlist.Delegate: only the metadata is used.

// NodeMeta returns the node's metadata for gossip.
func (m *membership) NodeMeta(limit int) []byte {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return m.meta
}

// NotifyMsg ignores user messages; deltas travel over gRPC.
func (m *membership) NotifyMsg([]byte) {}

// GetBroadcasts has nothing to broadcast.
func (m *membership) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState has no state to push.
func (m *membership) LocalState(join bool) []byte { return nil }

// MergeRemoteState has no state to merge.
func (m *membership) MergeRemoteState(buf []byte, join bool) {}

// memberlist.EventDelegate: every change triggers a refresh.

// NotifyJoin records a new member.
func (m *membership) NotifyJoin(n *memberlist.Node) { m.remember(n); m.signal() }

// NotifyLeave forgets a member that left or died.
func (m *membership) NotifyLeave(n *memberlist.Node) { m.forget(n); m.signal() }

// NotifyUpdate records a member whose metadata changed (new rules, a
// restart).
func (m *membership) NotifyUpdate(n *memberlist.Node) { m.remember(n); m.signal() }

// privateIP is the address memberlist advertises for a wildcard bind.
func privateIP() (string, error) { return sockaddr.GetPrivateIP() }
