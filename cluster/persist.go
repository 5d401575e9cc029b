package cluster

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	"time"

	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/store"
)

// countsKey is where a node's counts are kept in its store, and viewsKey
// what it believed the fleet admitted (owner allocation).
var (
	countsKey = []byte("counters/snapshot")
	viewsKey  = []byte("counters/views")
)

// defaultPersistInterval bounds what a crash loses: the admissions of at
// most this long.
const defaultPersistInterval = 250 * time.Millisecond

// persistLoop saves the counts every PersistInterval while they change, so
// that a crash, which skips Close, loses at most one interval's admissions.
func (n *Node) persistLoop(ctx context.Context) {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.PersistInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !n.changed.Swap(false) {
			continue
		}
		if err := n.persist(); err != nil {
			n.changed.Store(true)
			n.log.Warn("saving counts", "err", err)
			continue
		}
		n.metrics.Saves.Add(1)
	}
}

// persist saves every count the node holds for live windows, so that a
// restart keeps them.
func (n *Node) persist() error {
	at := n.now()
	b, err := proto.Marshal(wire.EncodeDelta(n.replica.Snapshot(at)))
	if err != nil {
		return fmt.Errorf("sluice: save counts: %w", err)
	}
	if err := n.store.Set(countsKey, b); err != nil {
		return fmt.Errorf("sluice: save counts: %w", err)
	}
	if b, err = proto.Marshal(wire.EncodeDelta(n.replica.Views(at))); err != nil {
		return fmt.Errorf("sluice: save views: %w", err)
	}
	if err := n.store.Set(viewsKey, b); err != nil {
		return fmt.Errorf("sluice: save views: %w", err)
	}
	n.metrics.LastSaveAt.Store(at)
	return nil
}

// restore merges the counts saved by the previous run. They belong to the
// previous incarnation, so they keep counting without being counted twice;
// what has expired since is dropped by the merge.
func (n *Node) restore() error {
	b, err := n.store.Get(countsKey)
	if errors.Is(err, store.ErrKeyNotFound) || err == nil && len(b) == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sluice: read saved counts: %w", err)
	}
	var msg sluicev1.Delta
	if err := proto.Unmarshal(b, &msg); err != nil {
		n.log.Warn("saved counts are unreadable; starting without them", "err", err)
		return nil
	}
	d, err := wire.DecodeDelta(&msg)
	if err != nil {
		n.log.Warn("saved counts are malformed; starting without them", "err", err)
		return nil
	}
	res, err := n.replica.ReceiveFrom(n.now(), d, counter.Origin{Asked: true})
	if err != nil {
		n.log.Warn("saved counts do not merge; starting without them", "err", err)
		return nil
	}
	n.log.Info("restored saved counts", "entries", res.Merged)
	n.restoreViews()
	return nil
}

// restoreViews takes what the previous run believed the fleet admitted as
// a floor under this run's view, so that a node restarted before its peers
// does not count from its own earlier counts alone. Views are a help, not
// counts: a missing or unreadable record is only logged.
func (n *Node) restoreViews() {
	b, err := n.store.Get(viewsKey)
	if err != nil || len(b) == 0 {
		if err != nil && !errors.Is(err, store.ErrKeyNotFound) {
			n.log.Warn("saved views are unreadable; starting without them", "err", err)
		}
		return
	}
	var msg sluicev1.Delta
	if err := proto.Unmarshal(b, &msg); err != nil {
		n.log.Warn("saved views are unreadable; starting without them", "err", err)
		return
	}
	d, err := wire.DecodeDelta(&msg)
	if err == nil && d.Kind != counter.KindView {
		err = fmt.Errorf("kind %d, want views", d.Kind)
	}
	if err != nil {
		n.log.Warn("saved views are malformed; starting without them", "err", err)
		return
	}
	if _, err := n.replica.ReceiveFrom(n.now(), d, counter.Origin{Asked: true}); err != nil {
		n.log.Warn("saved views do not merge; starting without them", "err", err)
	}
}
