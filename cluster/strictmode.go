package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/window"
)

// StrictMode switches strict mode on for a node (Config.Strict). Package
// cluster/strict provides it: strict.Mode{}. Strict mode lives in its own
// package so that a program whose rules are all batched links no Raft.
type StrictMode = strictapi.Mode

// Defaults of strict mode's settings in Config.
const (
	defaultStrictVoters  = 3
	defaultStrictTimeout = time.Second
	// defaultStrictBootstrapWait is five gossip probe intervals: time for a
	// member of a group to ping a node that forgot it, find it restarted
	// and rejoin it (restart_detect.go).
	defaultStrictBootstrapWait = 5 * time.Second
)

// strictEnabled returns ErrStrictNotEnabled, naming the rule, for the first
// strict rule of rules when mode is nil.
func strictEnabled(rules []window.Rule, mode StrictMode) error {
	if mode != nil {
		return nil
	}
	for _, r := range rules {
		if r.IsStrict() {
			return fmt.Errorf("rule %q is strict (sync interval -1): %w; set Config.Strict to strict.Mode{} (package github.com/sluicehq/sluice/cluster/strict)",
				r.Name, ErrStrictNotEnabled)
		}
	}
	return nil
}

// openStrict opens the node's strict mode and gives it the rules: it starts
// a Raft group if one is strict. The gRPC server exists and does not serve
// yet, so strict mode registers its service.
func (n *Node) openStrict(ctx context.Context) error {
	e, err := n.cfg.Strict.Open(strictHost{n})
	if err != nil {
		return fmt.Errorf("sluice: strict mode: %w", err)
	}
	n.strict = e
	return e.SetRules(ctx, window.AllParts(n.cfg.Rules))
}

// strictHost is the node as its strict mode sees it.
type strictHost struct{ n *Node }

func (h strictHost) Settings() strictapi.Settings {
	c := &h.n.cfg
	return strictapi.Settings{Name: c.Name, DataDir: c.DataDir, Clustered: c.BindAddr != "",
		RaftAddr: c.RaftAddr, RaftAdvertiseAddr: c.RaftAdvertiseAddr, Voters: c.StrictVoters,
		Timeout: c.StrictTimeout, BootstrapWait: c.StrictBootstrapWait, ReconnectInterval: c.ReconnectInterval}
}

func (h strictHost) Self() counter.Incarnation     { return h.n.self }
func (h strictHost) Logger() *slog.Logger          { return h.n.log }
func (h strictHost) Now() int64                    { return h.n.now() }
func (h strictHost) Replica() *counter.Replica     { return h.n.replica }
func (h strictHost) MarkChanged()                  { h.n.changed.Store(true) }
func (h strictHost) Store() *store.Store           { return h.n.store }
func (h strictHost) GRPCAddr() string              { return h.n.GRPCAddr() }
func (h strictHost) Counters() *strictapi.Counters { return &h.n.metrics.Counters }

func (h strictHost) ListenRaft(ctx context.Context, addr string) (net.Listener, error) {
	return h.n.listenRaft(ctx, addr)
}

func (h strictHost) DialRaft(ctx context.Context, addr string) (net.Conn, error) {
	return h.n.dialRaft(ctx, addr)
}

func (h strictHost) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if h.n.server != nil {
		h.n.server.reg.RegisterService(desc, impl)
	}
}

func (h strictHost) Peers() []strictapi.Peer {
	ps := h.n.peers.list()
	out := make([]strictapi.Peer, 0, len(ps))
	for _, p := range ps {
		out = append(out, strictapi.Peer{Name: p.info.name, RaftAddr: p.info.raftAddr, RaftID: p.info.raftID, Conn: p.conn})
	}
	return out
}

func (h strictHost) Broadcast(ctx context.Context, d *counter.Delta) { h.n.peers.broadcast(ctx, d) }

var _ strictapi.Host = strictHost{}
