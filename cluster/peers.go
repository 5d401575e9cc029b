package cluster

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// peerInfo is a live member as membership sees it.
type peerInfo struct {
	name     string
	boot     uint64
	grpcAddr string
	raftAddr string
	raftID   string // its server ID in the strict group
}

func (p peerInfo) inc() counter.Incarnation { return counter.Incarnation{Node: p.name, Boot: p.boot} }

// peerSet owns one connection and one sender goroutine per live peer.
type peerSet struct {
	n   *Node
	ctx context.Context
	// creds are the credentials of every dial to a peer.
	creds credentials.TransportCredentials

	mu    sync.Mutex
	peers map[counter.Incarnation]*peer
	// live are the members as membership last listed them, this node
	// included.
	live []peerInfo
	// joined is signalled (without blocking) when a peer joins: a node
	// that could not pull the fleet's state at start waits on it.
	joined chan struct{}

	// stats are the live peers' sync traffic by name, kept across a
	// peer's restarts and dropped when it leaves. statsMu guards the map
	// alone, so that a delta received need not wait for ps.mu, which a
	// membership change holds while it stops streams.
	statsMu sync.Mutex
	stats   map[string]*peerCounters
}

// peer streams this node's deltas to one other node. Admission never waits
// on it: deltas are queued, and a full queue is dropped and replaced by a
// resend of everything at the next round.
type peer struct {
	info   peerInfo
	conn   *grpc.ClientConn
	queue  chan queued
	cancel context.CancelFunc
	done   chan struct{}
	// written is the node-clock time of the counts in the newest delta or
	// snapshot written to the peer's stream: what the peer will hold once
	// it has read them.
	written atomic.Int64
	// stats are the sync traffic with the peer's name.
	stats *peerCounters
	// vouched is set once a sync stream to the peer opened: under TLS,
	// proof that it holds a peer CA's certificate (see vouchedIncs).
	vouched atomic.Bool
}

// queued is a delta waiting for its peer, in its wire form (one message,
// or several for a delta of more than wire.SplitEntries entries), with the
// number of entries it carries and the node-clock time of its counts (0 for
// a one-off message that is not a sync round).
type queued struct {
	msgs    [][]byte
	entries int
	at      int64
}

// newQueued puts d, sent at sentAt on this node's own clock, in its wire
// form for a peer's queue. A delta of more entries than wire.SplitEntries
// goes as several, each within the bound a peer takes (wire.ParseDelta)
// and within a gRPC message: a node that has just seen a flood of new keys
// reports them all at its next round.
func newQueued(d *counter.Delta, sentAt, at int64) queued {
	q := queued{entries: d.Size(), at: at}
	parts := []*counter.Delta{d}
	if q.entries > wire.SplitEntries {
		parts = splitDelta(d, wire.SplitEntries)
	}
	q.msgs = make([][]byte, len(parts))
	for i, p := range parts {
		q.msgs[i] = wire.AppendDelta(make([]byte, 0, wire.DeltaCap(p)), p, sentAt)
	}
	return q
}

// peerQueue is how many deltas may wait for a slow peer.
const peerQueue = 8

func newPeerSet(n *Node, ctx context.Context) *peerSet {
	return &peerSet{n: n, ctx: ctx, creds: n.peerCredentials(), peers: make(map[counter.Incarnation]*peer), joined: make(chan struct{}, 1),
		stats: map[string]*peerCounters{}}
}

// update makes the set match the live members: it dials new ones, stops
// streaming to departed ones and tells the replica who is live.
func (ps *peerSet) update(live []peerInfo) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	want := make(map[counter.Incarnation]peerInfo, len(live))
	for _, p := range live {
		want[p.inc()] = p
	}
	changed := false
	for inc, p := range ps.peers {
		if w, ok := want[inc]; !ok || w.grpcAddr != p.info.grpcAddr || w.raftAddr != p.info.raftAddr || w.raftID != p.info.raftID {
			changed = true
			p.stop()
			delete(ps.peers, inc)
			ps.n.log.Info("peer gone", "peer", inc.Node, "boot", inc.Boot)
			if _, back := want[inc]; !back {
				ps.n.skew.forget(inc.Node)
				ps.n.borrows.heardFrom(inc)
			}
		}
	}
	for inc, info := range want {
		if _, ok := ps.peers[inc]; ok {
			continue
		}
		p, err := ps.start(info)
		if err != nil {
			ps.n.log.Warn("cannot dial peer", "peer", info.name, "addr", info.grpcAddr, "err", err)
			continue
		}
		ps.peers[inc] = p
		changed = true
		select {
		case ps.joined <- struct{}{}:
		default:
		}
		ps.n.log.Info("peer joined", "peer", inc.Node, "boot", inc.Boot, "grpc_addr", info.grpcAddr)
	}
	ps.statsMu.Lock()
	for name := range ps.stats {
		if !slices.ContainsFunc(live, func(p peerInfo) bool { return p.name == name }) {
			delete(ps.stats, name)
		}
	}
	ps.statsMu.Unlock()
	ps.live = live
	ps.n.replica.SetPeers(ps.vouchedIncs())
	ps.n.metrics.Peers.Store(int64(len(ps.peers)))
	ps.n.rescheduleTicks()
	if ps.n.strict != nil && changed {
		// Strict mode waits on the members: for a group to bootstrap, for
		// voters to replace, for the peers a lone node waits on.
		ps.n.strict.MembersChanged()
	}
}

// vouchedIncs are the incarnations the replica is to count as the fleet:
// its live peers, those alone under TLS whose sync stream
// opened. Gossip is not TLS's, so a process with no peer certificate can
// still be a member; counted as one, it would own keys, and the checks
// that asked it for a share would wait on an owner no stream can reach.
// Under TLS a peer is counted once this node has reached it with mutual
// TLS, until it leaves. The caller holds ps.mu.
func (ps *peerSet) vouchedIncs() []counter.Incarnation {
	incs := make([]counter.Incarnation, 0, len(ps.live))
	for _, info := range ps.live {
		inc := info.inc()
		if p := ps.peers[inc]; ps.n.tls != nil && (p == nil || !p.vouched.Load()) {
			continue
		}
		incs = append(incs, inc)
	}
	return incs
}

// vouch records that a sync stream to p opened, and under TLS counts p in
// the fleet from then on.
func (ps *peerSet) vouch(p *peer) {
	if p.vouched.Swap(true) || ps.n.tls == nil {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.peers[p.info.inc()] != p {
		return // gone meanwhile
	}
	ps.n.log.Info("peer reached over mutual TLS: counted in the fleet", "peer", p.info.name)
	ps.n.replica.SetPeers(ps.vouchedIncs())
	ps.n.rescheduleTicks()
}

func (ps *peerSet) start(info peerInfo) (*peer, error) {
	conn, err := ps.dial(info.grpcAddr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ps.ctx)
	p := &peer{info: info, conn: conn, queue: make(chan queued, peerQueue), cancel: cancel, done: make(chan struct{}),
		stats: ps.countersFor(info.name, true)}
	go p.run(ctx, ps.n)
	return p, nil
}

// dial returns a connection to a peer's gRPC address, made when first
// used.
func (ps *peerSet) dial(grpcAddr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+grpcAddr, grpc.WithTransportCredentials(ps.creds),
		grpc.WithContextDialer(ps.n.network().Dial),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize)))
}

// countersFor returns the sync traffic counters of the peer named name;
// with create, a new peer's, else nil for a name that is no live peer's
// (a delta's sender is outside input).
func (ps *peerSet) countersFor(name string, create bool) *peerCounters {
	ps.statsMu.Lock()
	defer ps.statsMu.Unlock()
	c := ps.stats[name]
	if c == nil && create {
		c = &peerCounters{}
		ps.stats[name] = c
	}
	return c
}

// send hands each outbound delta, built at node-clock time at, to its peer
// without waiting.
func (ps *peerSet) send(out []counter.Outbound, at int64) {
	if len(out) == 0 {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, o := range out {
		p := ps.peers[o.To]
		if p == nil {
			continue
		}
		// The own clock, uncorrected: peers compare clocks, and a sender's
		// correction fed back into their estimates would compound.
		msg := newQueued(o.Delta, ps.n.ownNow(), at)
		select {
		case p.queue <- msg:
		default:
			// The peer is not keeping up: drop this delta and send it
			// everything at the next round instead.
			ps.n.replica.ResendAll(o.To)
			ps.n.metrics.DeltasDropped.Add(1)
		}
	}
}

// broadcast sends d to every live peer, waiting for room in a slow peer's
// queue until ctx ends: it is for one-off messages that no later round
// repeats, such as counts a rule brings back from strict mode.
func (ps *peerSet) broadcast(ctx context.Context, d *counter.Delta) {
	msg := newQueued(d, ps.n.ownNow(), 0)
	for _, p := range ps.list() {
		select {
		case p.queue <- msg:
		case <-ctx.Done():
			return
		}
	}
}

// list returns the live peers.
func (ps *peerSet) list() []*peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]*peer, 0, len(ps.peers))
	for _, p := range ps.peers {
		out = append(out, p)
	}
	return out
}

// byName returns the live peer with the given node name, or nil.
func (ps *peerSet) byName(name string) *peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for inc, p := range ps.peers {
		if inc.Node == name {
			return p
		}
	}
	return nil
}

// infos returns what membership said of each live peer.
func (ps *peerSet) infos() []peerInfo {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]peerInfo, 0, len(ps.peers))
	for _, p := range ps.peers {
		out = append(out, p.info)
	}
	return out
}

// writtenThrough returns the node-clock time up to which this node's
// counts have been written to every live peer, or 0 when there are no
// peers: what a crash now would lose is what was admitted after it.
func (ps *peerSet) writtenThrough() int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.peers) == 0 {
		return 0
	}
	through := int64(math.MaxInt64)
	for _, p := range ps.peers {
		through = min(through, p.written.Load())
	}
	return through
}

func (ps *peerSet) closeAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for inc, p := range ps.peers {
		p.stop()
		delete(ps.peers, inc)
	}
}

func (p *peer) stop() {
	p.cancel()
	<-p.done
	_ = p.conn.Close()
}

// run keeps one Sync stream open to the peer and writes queued deltas to
// it. A fresh stream starts with this node's whole view, every incarnation
// it knows included: deltas carry only the sender's own entries, so
// without it what a node that died admitted would reach only the peers
// that heard it before it died, and a node restarted from its data dir
// would never pass on its previous run's counts. After a broken stream
// the next one starts so again, because the lost messages cannot be known.
func (p *peer) run(ctx context.Context, n *Node) {
	defer close(p.done)
	client := sluicev1.NewPeerClient(p.conn)
	var stream sluicev1.Peer_SyncClient
	backoff := 50 * time.Millisecond
	inc := p.info.inc()
	broke := func() {
		if stream != nil {
			_, _ = stream.CloseAndRecv()
			stream = nil
		}
		n.replica.ResendAll(inc)
		n.metrics.StreamResets.Add(1)
	}
	for {
		var msgs []queued
		if stream == nil {
			s, err := client.Sync(ctx, grpc.ForceCodecV2(newPeerCodec()))
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				n.log.Debug("sync stream failed to open", "peer", p.info.name, "err", err)
				n.replica.ResendAll(inc)
				if !sleep(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			stream, backoff = s, 50*time.Millisecond
			n.peers.vouch(p)
			// Whatever was due to the peer before this stream (to an
			// earlier stream, dropped with it, or while the peer was
			// cut off and out of the set) may never have reached it:
			// an owner's word on a quiet key is said once.
			n.replica.ResendAll(inc)
			at := n.now()
			chunks := splitDelta(n.replica.Snapshot(at), pullChunk)
			for i, chunk := range chunks {
				// The snapshot covers its time once its last chunk is out.
				q := newQueued(chunk, n.ownNow(), 0)
				if i == len(chunks)-1 {
					q.at = at
				}
				msgs = append(msgs, q)
			}
		} else {
			select {
			case <-ctx.Done():
				_, _ = stream.CloseAndRecv()
				return
			case q := <-p.queue:
				msgs = append(msgs, q)
			}
		}
	send:
		for _, q := range msgs {
			for _, msg := range q.msgs {
				if err := stream.SendMsg(&rawDelta{msg}); err != nil {
					if !errors.Is(err, io.EOF) {
						n.log.Debug("sync stream broke", "peer", p.info.name, "err", err)
					}
					broke()
					break send
				}
				n.metrics.DeltasSent.Add(1)
				n.metrics.BytesSent.Add(int64(len(msg)))
				p.stats.deltasSent.Add(1)
				p.stats.bytesSent.Add(uint64(len(msg)))
			}
			if q.at > p.written.Load() {
				p.written.Store(q.at)
			}
			n.metrics.EntriesSent.Add(int64(q.entries))
		}
	}
}

// sleep waits d or until ctx ends; it reports whether to go on.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// pullState merges a peer's full state before the node serves, so that a
// new or restarted node starts from what the fleet has admitted. It tries
// each live peer until one answers or ctx ends, and reports whether one
// did. It reports alone, and does not wait, when there is no fleet to pull
// from: the node has no peer and no seed, or joined (reached a seed) and
// gossip lists no member but itself, as when its seeds are its own
// address (the first pod behind a headless service).
func (n *Node) pullState(ctx context.Context, joined bool) (pulled, alone bool) {
	for {
		peers := n.peers.list()
		if len(peers) == 0 && (len(n.cfg.Join) == 0 || joined && n.members.ml.NumMembers() <= 1) {
			return false, true
		}
		if n.pullAny(ctx, peers) {
			return true, false
		}
		if !sleep(ctx, 100*time.Millisecond) {
			if len(peers) > 0 {
				n.log.Warn("could not pull state from any peer; serving from what arrives by sync")
			}
			return false, false
		}
	}
}

// pullLater pulls the fleet's state from the first peer that answers, for
// a node that started without: one alone then, or cut off from the fleet
// when it restarted. Sync alone would not bring it what it missed, for
// the owners of keys it no longer serves tell only those that report to
// them, and it would keep the views it saved before its crash for the
// rest of their windows.
func (n *Node) pullLater(ctx context.Context) {
	wait := pullRetryMin
	for {
		peers := n.peers.list()
		if len(peers) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-n.peers.joined:
			}
			continue
		}
		if n.pullAny(ctx, peers) {
			n.metrics.LatePulls.Add(1)
			n.ready.Store(true)
			return
		}
		if !sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, pullRetryMax)
	}
}

// pullRetryMin and pullRetryMax bound the wait between failed pulls after
// start, when peers are known but none answered.
const (
	pullRetryMin = 100 * time.Millisecond
	pullRetryMax = 5 * time.Second
)

// pullAny pulls from the first of peers that answers, and reports whether
// one did.
func (n *Node) pullAny(ctx context.Context, peers []*peer) bool {
	for _, p := range peers {
		got, err := n.pullFrom(ctx, p.conn)
		if err == nil {
			n.log.Info("pulled state", "peer", p.info.name, "entries", got)
			return true
		}
		n.log.Debug("pull failed", "peer", p.info.name, "err", err)
	}
	return false
}

// pullFrom pulls the state of the peer at the end of conn and merges it,
// and returns how many entries it held.
func (n *Node) pullFrom(ctx context.Context, conn *grpc.ClientConn) (int, error) {
	stream, err := sluicev1.NewPeerClient(conn).Pull(ctx, &sluicev1.PullRequest{From: wire.EncodeInc(n.self)})
	if err != nil {
		return 0, err
	}
	got := 0
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		d, err := wire.DecodeDelta(msg)
		if err != nil {
			return got, err
		}
		// State this node asked a member for: it may name incarnations
		// this node has not heard of, and counts admitted under other
		// rules.
		if _, err := n.replica.ReceiveFrom(n.now(), d, counter.Origin{Asked: true}); err != nil {
			return got, err
		}
		got += d.Size()
	}
}
