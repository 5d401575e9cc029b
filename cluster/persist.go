package cluster

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/store"
)

// countsKey is where a node's counts are kept in its store.
var countsKey = []byte("counters/snapshot")

// persist saves every count the node holds for live windows, so that a
// restart keeps them.
func (n *Node) persist() error {
	b, err := proto.Marshal(encodeDelta(n.replica.Snapshot(n.now())))
	if err != nil {
		return fmt.Errorf("sluice: save counts: %w", err)
	}
	if err := n.store.Set(countsKey, b); err != nil {
		return fmt.Errorf("sluice: save counts: %w", err)
	}
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
	d, err := decodeDelta(&msg)
	if err != nil {
		n.log.Warn("saved counts are malformed; starting without them", "err", err)
		return nil
	}
	res, err := n.replica.Receive(n.now(), d)
	if err != nil {
		n.log.Warn("saved counts do not merge; starting without them", "err", err)
		return nil
	}
	n.log.Info("restored saved counts", "entries", res.Merged)
	return nil
}
