package cluster

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// peerService serves the sluice.v1.Peer API: deltas in, full state out.
type peerService struct {
	sluicev1.UnimplementedPeerServer
	node *Node
}

// pullChunk is how many entries go into one Pull message.
const pullChunk = wire.SplitEntries

// Sync merges every delta the stream brings. A malformed delta ends the
// stream with InvalidArgument naming the sender, one too large
// (wire.ErrDeltaTooLarge) with ResourceExhausted; the sender then
// reconnects and resends everything. So does a delta from a node that is
// not a member of the fleet as this node's gossip sees it, after waiting a
// moment for gossip to tell of a member that has just joined (see
// syncOrigin), with Unavailable; a node without gossip takes no deltas
// (FailedPrecondition). A delta that names incarnations this node has not
// heard of waits while it pulls the sender's state (see
// learnIncarnations). Entries the replica rejects (see
// counter.Replica.ReceiveFrom) are counted by reason, the rest of the
// delta merged.
func (s *peerService) Sync(stream sluicev1.Peer_SyncServer) error {
	n := s.node
	// Receive in a goroutine so that a closing node ends the stream at once
	// instead of waiting for the peer to hang up.
	type recv struct {
		msg []byte
		err error
	}
	in := make(chan recv)
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	// A wait for gossip ends when the node closes, too.
	defer context.AfterFunc(n.peers.ctx, cancel)()
	go func() {
		for {
			// Read in the wire form, which wire.ParseDelta reads straight into a
			// counter delta; the server's codec passes it through.
			var raw rawDelta
			err := stream.RecvMsg(&raw)
			select {
			case in <- recv{raw.b, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var received uint64
	for {
		var r recv
		select {
		case <-n.done:
			return status.Error(codes.Unavailable, "node is shutting down")
		case r = <-in:
		}
		msg, err := r.msg, r.err
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&sluicev1.SyncAck{Received: received})
		}
		if err != nil {
			return err
		}
		received++
		d, sentAt, err := wire.ParseDelta(msg)
		if err != nil {
			n.metrics.DeltasRejected.Add(1)
			n.log.Warn("rejected a delta", "err", err)
			return status.Error(n.deltaRefused(err), err.Error())
		}
		origin, refused, err := n.syncOrigin(ctx, d.From)
		if refused {
			n.metrics.DeltasNotMember.Add(1)
			n.log.Debug("rejected a delta from a node that is not a member", "from", d.From.Node, "boot", d.From.Boot, "err", err)
		}
		if err != nil {
			return err
		}
		n.noteSkew(d.From.Node, sentAt)
		n.borrows.heardFrom(d.From)
		if n.replica.Unheard(d) {
			n.learnIncarnations(ctx, d.From.Node)
		}
		res, err := n.replica.ReceiveFrom(n.now(), d, origin)
		n.changed.Store(true)
		if n.strict != nil {
			n.strict.Received(d)
		}
		if err != nil {
			n.metrics.DeltasRejected.Add(1)
			n.log.Warn("rejected a delta", "err", err)
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if res.Reply != nil {
			n.sendInOrder(res.Reply, n.now(), nil)
		}
		if d.Kind == counter.KindAnswer {
			n.borrows.answered(d)
		}
		n.countRejected(d, &res)
		n.metrics.DeltasReceived.Add(1)
		n.metrics.EntriesMerged.Add(int64(res.Merged))
		if c := n.peers.countersFor(d.From.Node, false); c != nil {
			c.deltasReceived.Add(1)
			c.bytesReceived.Add(uint64(len(msg)))
		}
		if len(res.UnknownRules) > 0 {
			n.metrics.UnknownRuleDeltas.Add(1)
			n.log.Debug("delta names rules this node does not have", "from", d.From.Node, "rules", res.UnknownRules)
		}
	}
}

// countRejected counts, once per reason, a delta whose entries the replica
// rejected.
func (n *Node) countRejected(d *counter.Delta, res *counter.ReceiveResult) {
	for why, k := range res.Rejected {
		if k == 0 {
			continue
		}
		n.metrics.rejected(counter.Reason(why)).Add(1)
		n.log.Debug("rejected entries of a delta", "from", d.From.Node, "reason", counter.Reason(why).String(), "entries", k)
	}
}

// Pull streams the node's full state in chunks.
func (s *peerService) Pull(req *sluicev1.PullRequest, stream sluicev1.Peer_PullServer) error {
	n := s.node
	now := n.now()
	snap := n.replica.Snapshot(now)
	// The views come last: the snapshot's counts are attributed, the views
	// only a floor under them.
	chunks := append(splitDelta(snap, pullChunk), splitDelta(n.replica.Views(now), pullChunk)...)
	for _, chunk := range chunks {
		if err := stream.Send(wire.EncodeDelta(chunk)); err != nil {
			return err
		}
	}
	n.log.Debug("served a state pull", "to", req.GetFrom().GetNode(), "entries", snap.Size())
	return nil
}

// splitDelta cuts a delta into deltas of at most max entries each, every
// one carrying the full incarnation list so it stands alone, and d's
// sequence number and ack.
func splitDelta(d *counter.Delta, max int) []*counter.Delta {
	var out []*counter.Delta
	cur := &counter.Delta{From: d.From, Seq: d.Seq, Ack: d.Ack, Kind: d.Kind, Incarnations: d.Incarnations, Live: d.Live, Full: d.Full}
	size := 0
	for _, rd := range d.Rules {
		for start := 0; start < len(rd.Entries); {
			room := max - size
			end := min(start+room, len(rd.Entries))
			cur.Rules = append(cur.Rules, counter.RuleDelta{Rule: rd.Rule, Entries: rd.Entries[start:end]})
			size += end - start
			start = end
			if size == max {
				out = append(out, cur)
				cur = &counter.Delta{From: d.From, Seq: d.Seq, Ack: d.Ack, Kind: d.Kind, Incarnations: d.Incarnations, Live: d.Live, Full: d.Full}
				size = 0
			}
		}
	}
	if size > 0 || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// Members lists the cluster as this node sees it.
func (s *peerService) Members(ctx context.Context, _ *sluicev1.MembersRequest) (*sluicev1.MembersResponse, error) {
	n := s.node
	grpcAddr := n.GRPCAddr()
	if n.members != nil {
		grpcAddr = n.members.grpcAddr // what peers are told
	}
	self := &sluicev1.Member{Name: n.cfg.Name, State: "alive", GrpcAddr: grpcAddr, Boot: n.self.Boot,
		RulesHash: n.rulesHash(), RulesMatch: true, Self: true, GossipAddr: n.GossipAddr()}
	resp := &sluicev1.MembersResponse{Members: []*sluicev1.Member{self}}
	if n.members == nil {
		return resp, nil
	}
	members := n.members.members()
	suspect := n.members.unreachable(ctx, members)
	for _, m := range members {
		if m.name == n.cfg.Name {
			continue
		}
		state := "alive"
		if suspect[m.name] {
			state = "suspect"
		}
		resp.Members = append(resp.Members, memberOf(n, m.name, state, m.gossip, m.meta))
	}
	for name, f := range n.members.reconnect.failedMembers() {
		resp.Members = append(resp.Members, memberOf(n, name, "failed", f.gossip, f.meta))
	}
	return resp, nil
}

// memberOf describes a member for Members.
func memberOf(n *Node, name, state, gossip string, meta []byte) *sluicev1.Member {
	mem := &sluicev1.Member{Name: name, State: state, GossipAddr: gossip}
	if m, err := decodeMeta(meta); err == nil {
		mem.GrpcAddr, mem.Boot, mem.RulesHash, mem.RulesMatch = m.grpcAddr, m.boot, m.rulesHash, m.rulesHash == n.rulesHash()
	}
	return mem
}
