package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// forgedRule is the rule of the forged-delta tests: full-mesh, so that a
// peer's counts show in every view at once, and an hour long, so that a
// test runs in one window.
var forgedRule = window.Rule{Name: "api", Count: 10, Window: time.Hour, Type: window.Fixed,
	SyncInterval: 100 * time.Millisecond, Allocation: window.Adaptive}

// forger is a fake peer: a Sync stream to a node, opened as a peer opens
// one, that sends whatever deltas a test makes up.
type forger struct {
	t      *testing.T
	stream sluicev1.Peer_SyncClient
}

func dialForger(t *testing.T, nd *Node) *forger {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+nd.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	stream, err := sluicev1.NewPeerClient(conn).Sync(ctx, grpc.ForceCodecV2(newPeerCodec()))
	if err != nil {
		t.Fatal(err)
	}
	return &forger{t: t, stream: stream}
}

// send writes d to the stream; a stream the node has ended fails a later
// send or the close, not this one.
func (f *forger) send(d *counter.Delta) {
	f.t.Helper()
	f.sendRaw(wire.AppendDelta(nil, d, time.Now().UnixNano()))
}

func (f *forger) sendRaw(b []byte) {
	f.t.Helper()
	if err := f.stream.SendMsg(&rawDelta{b}); err != nil && !errors.Is(err, io.EOF) {
		f.t.Fatal(err)
	}
}

// close ends the stream and returns how the node ended it.
func (f *forger) close() error {
	_, err := f.stream.CloseAndRecv()
	return err
}

// forgedDelta is a delta from inc of entries of incs (inc first).
func forgedDelta(inc counter.Incarnation, kind counter.Kind, incs []counter.Incarnation, entries ...counter.Entry) *counter.Delta {
	return &counter.Delta{From: inc, Seq: 1, Kind: kind, Full: len(incs) > 1, Incarnations: append([]counter.Incarnation{inc}, incs...),
		Rules: []counter.RuleDelta{{Rule: forgedRule.Name, Entries: entries}}}
}

func viewOf(t *testing.T, nd *Node, key string) int64 {
	t.Helper()
	_, v, err := nd.View(forgedRule.Name, key)
	if err != nil {
		t.Fatal(err)
	}
	return v.Curr
}

// TestSyncRejectsForged dials a node's Sync stream as a fake peer that
// claims to be the node's real peer, and sends it deltas that no real node
// sends: each is rejected, counted by reason and served at /metrics, and
// changes no view, while the stream goes on and a right delta on it is
// merged. A relayed incarnation the node has not heard of makes it pull the
// real peer's state first: one the peer has heard of is then taken, with
// what the peer holds of it; a made-up one is rejected.
func TestSyncRejectsForged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2-node cluster")
	}
	clock := alignedClock(forgedRule.Window)
	cl := startCluster(t, 2, []window.Rule{forgedRule}, clock)
	a, b := cl[0], cl[1]
	idx := window.Index(clock(), forgedRule.Window)
	spoofed := b.Incarnation()
	stranger := counter.Incarnation{Node: "nobody", Boot: 1}
	// b holds counts of an incarnation that left before a heard of it,
	// as a node that was cut off from it would find.
	gone := counter.Incarnation{Node: "gone", Boot: 9}
	if _, err := b.replica.ReceiveFrom(clock(), forgedDelta(gone, counter.KindSync, nil,
		counter.Entry{Key: "relayed", Window: idx, Admitted: 4}), counter.Origin{Asked: true}); err != nil {
		t.Fatal(err)
	}

	f := dialForger(t, a)
	// A relay of an incarnation a has not heard of waits while a pulls
	// the state of the member it names as sender: b has heard of it, so a
	// learns of it, with b's counts of it, and takes the relay.
	f.send(forgedDelta(spoofed, counter.KindSync, []counter.Incarnation{gone},
		counter.Entry{Key: "relayed", Window: idx, Inc: 1, Admitted: 4}))
	waitFor(t, patience, "a learns of the incarnation from b's state", func() bool { return viewOf(t, a, "relayed") == 4 })

	tests := []struct {
		name  string
		delta *counter.Delta
		count func(Metrics) int64
		key   string
	}{
		{"more than the count", forgedDelta(spoofed, counter.KindSync, nil, counter.Entry{Key: "over", Window: idx, Admitted: 11}),
			func(m Metrics) int64 { return m.DeltasOverCount }, "over"},
		{"two windows ahead", forgedDelta(spoofed, counter.KindSync, nil, counter.Entry{Key: "ahead", Window: idx + 2, Admitted: 3}),
			func(m Metrics) int64 { return m.DeltasFutureWindow }, "ahead"},
		// a knows of b and gone beside itself: the others admitted at
		// most 2 × 10.
		{"an answer over what the others could have admitted", forgedDelta(spoofed, counter.KindAnswer, nil,
			counter.Entry{Key: "answered", Window: idx, Admitted: 21, Told: 1}),
			func(m Metrics) int64 { return m.DeltasOverCount }, "answered"},
		// b's state, pulled again or not, does not name it.
		{"an incarnation no node has heard of", forgedDelta(spoofed, counter.KindSync, []counter.Incarnation{stranger},
			counter.Entry{Key: "made-up", Window: idx, Inc: 1, Admitted: 5}),
			func(m Metrics) int64 { return m.DeltasUnknownInc }, "made-up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.count(a.Metrics())
			f.send(tt.delta)
			waitFor(t, patience, "the rejection is counted", func() bool { return tt.count(a.Metrics()) == before+1 })
			if v := viewOf(t, a, tt.key); v != 0 {
				t.Errorf("a's view of %s is %d, want the forged entry rejected", tt.key, v)
			}
		})
	}

	// The stream is still open: an entry within the count is merged.
	f.send(forgedDelta(spoofed, counter.KindSync, nil, counter.Entry{Key: "right", Window: idx, Admitted: 3}))
	waitFor(t, patience, "a right entry is merged", func() bool { return viewOf(t, a, "right") == 3 })

	if err := f.close(); err != nil {
		t.Fatalf("the stream ended with %v, want it open to the end", err)
	}
	if v := viewOf(t, a, "made-up"); v != 0 {
		t.Errorf("a's view of made-up is %d after pulling b's state, want 0", v)
	}

	m := a.Metrics()
	var out strings.Builder
	if err := m.WritePrometheus(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("sluice_sync_deltas_rejected_total{reason=%q} %d", "over_count", m.DeltasOverCount),
		fmt.Sprintf("sluice_sync_deltas_rejected_total{reason=%q} %d", "future_window", m.DeltasFutureWindow),
		fmt.Sprintf("sluice_sync_deltas_rejected_total{reason=%q} %d", "unknown_incarnation", m.DeltasUnknownInc),
		`sluice_sync_deltas_rejected_total{reason="malformed"} 0`,
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", want, out.String())
		}
	}
	if m.DeltasOverCount != 2 || m.DeltasFutureWindow != 1 || m.DeltasUnknownInc != 1 {
		t.Errorf("rejections counted %d over the count, %d ahead, %d unknown incarnation; want 2, 1, 1",
			m.DeltasOverCount, m.DeltasFutureWindow, m.DeltasUnknownInc)
	}
}

// TestSyncRefusesWhole: a delta from a node that is not a member, or that
// does not parse, ends the stream, and is counted; a node that runs no
// gossip takes no deltas, and goes on deciding checks.
func TestSyncRefusesWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node with gossip")
	}
	clock := alignedClock(forgedRule.Window)
	member := startCluster(t, 1, []window.Rule{forgedRule}, clock)[0]
	lone, err := Start(context.Background(), Config{Name: "lone", Rules: []window.Rule{forgedRule}, GRPCAddr: "127.0.0.1:0",
		Logger: testLogger(t), Now: clockOf(clock), ShutdownTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lone.Close() })
	idx := window.Index(clock(), forgedRule.Window)
	mallory := counter.Incarnation{Node: "mallory", Boot: 1}
	delta := wire.AppendDelta(nil, forgedDelta(mallory, counter.KindSync, nil,
		counter.Entry{Key: "k", Window: idx, Admitted: 3}), time.Now().UnixNano())
	tests := []struct {
		name  string
		node  *Node
		msg   []byte
		code  codes.Code
		count func(Metrics) int64
	}{
		// Refused once gossip has not told of it within senderWait.
		{"not a member", member, delta, codes.Unavailable, func(m Metrics) int64 { return m.DeltasNotMember }},
		{"malformed", member, []byte{0xff, 0xff, 0xff}, codes.InvalidArgument, func(m Metrics) int64 { return m.DeltasRejected }},
		{"to a node without gossip", lone, delta, codes.FailedPrecondition, func(m Metrics) int64 { return m.DeltasNotMember }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.count(tt.node.Metrics())
			f := dialForger(t, tt.node)
			f.sendRaw(tt.msg)
			if err := f.close(); status.Code(err) != tt.code {
				t.Fatalf("the stream ended with %v, want %v", err, tt.code)
			}
			if got := tt.count(tt.node.Metrics()); got != before+1 {
				t.Errorf("counted %d, want %d", got, before+1)
			}
			if _, v, _ := tt.node.View(forgedRule.Name, "k"); v != (window.Counts{}) {
				t.Errorf("the refused delta changed the view: %+v", v)
			}
		})
	}
	if d, err := lone.Allow(context.Background(), forgedRule.Name, "k", 1); err != nil || !d.Allowed {
		t.Errorf("the node without gossip, after refusing a delta: %+v, %v", d, err)
	}
}

// gossipOnly is a memberlist delegate that gossips fixed metadata and
// nothing else.
type gossipOnly struct{ meta []byte }

func (g gossipOnly) NodeMeta(int) []byte                  { return g.meta }
func (gossipOnly) NotifyMsg([]byte)                       {}
func (gossipOnly) GetBroadcasts(int, int) [][]byte        { return nil }
func (gossipOnly) LocalState(bool) []byte                 { return nil }
func (gossipOnly) MergeRemoteState(buf []byte, join bool) {}

// TestSyncHoldsJoiningMember: a node that has just joined streams to the
// members it learnt of from its seed before gossip has told them of it.
// Its first delta to a member waits for gossip instead of being refused,
// and is merged once gossip lists the sender.
func TestSyncHoldsJoiningMember(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node with gossip")
	}
	clock := alignedClock(forgedRule.Window)
	nd := startCluster(t, 1, []window.Rule{forgedRule}, clock)[0]
	idx := window.Index(clock(), forgedRule.Window)
	late := counter.Incarnation{Node: "late", Boot: 42}

	f := dialForger(t, nd)
	f.send(forgedDelta(late, counter.KindSync, nil, counter.Entry{Key: "held", Window: idx, Admitted: 2}))
	// Then the sender joins, with the node's rules, as gossip tells it.
	meta, err := nodeMeta{grpcAddr: "127.0.0.1:1", boot: late.Boot, rulesHash: nd.rulesHash()}.encode()
	if err != nil {
		t.Fatal(err)
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort = late.Node, "127.0.0.1", 0
	mc.Delegate = gossipOnly{meta}
	mc.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{nd.GossipAddr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, patience, "the held delta is merged", func() bool { return viewOf(t, nd, "held") == 2 })
	if got := nd.Metrics().DeltasNotMember; got != 0 {
		t.Errorf("%d deltas refused as from no member, want the joining member's held", got)
	}
	if err := f.close(); err != nil {
		t.Errorf("the stream ended with %v, want it open to the end", err)
	}
}
