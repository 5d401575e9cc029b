package cluster

import (
	"encoding/binary"
	"time"

	"github.com/hashicorp/memberlist"
)

// A node restarted on its old gossip address answers the fleet's pings at
// once, so memberlist never declares it failed, and it learns of the fleet
// only at the next push-pull, up to a minute later. A node with no seeds of
// its own (the fleet's first seed, typically) meanwhile believes it is
// alone, and in strict mode would start a group of its own beside the one
// its peers still run. So each ack carries the boot of the node that sends
// it: a member that answers as another boot than gossip says has restarted,
// and the pinger joins it again, which tells it of the fleet at once.

// An ack also carries its sender's clock, so that every node hears every
// peer's clock through gossip's probes, whether or not they exchange
// counts: under owner allocation a node sends deltas only to the owners of
// the keys it serves.

// AckPayload is memberlist's hook for what an ack carries: this node's boot
// and its clock (Unix nanoseconds, uncorrected).
func (m *membership) AckPayload() []byte {
	b := binary.LittleEndian.AppendUint64(nil, m.n.self.Boot)
	return binary.LittleEndian.AppendUint64(b, uint64(m.n.ownNow()))
}

// NotifyPingComplete is memberlist's hook for a direct ping's ack: a member
// whose ack names another boot than its gossiped metadata is rejoined, and
// the clock it carries is a sample of the member's clock offset.
func (m *membership) NotifyPingComplete(other *memberlist.Node, _ time.Duration, payload []byte) {
	if len(payload) != 8 && len(payload) != 16 || other == nil {
		return
	}
	if len(payload) == 16 {
		if sentAt := int64(binary.LittleEndian.Uint64(payload[8:])); sentAt > 0 {
			m.n.noteSkew(other.Name, sentAt)
		}
	}
	boot := binary.LittleEndian.Uint64(payload[:8])
	meta, err := decodeMeta(other.Meta)
	if err != nil || meta.boot == boot {
		return
	}
	select {
	case m.restarted <- gossipAddr(other.Addr, other.Port):
	default: // one rejoin at a time is enough: it brings the whole fleet
	}
}

// rejoin joins a member that restarted, so that both sides exchange what
// they know of the fleet.
func (m *membership) rejoin(addr string) {
	if joined, err := m.ml.Join([]string{addr}); joined > 0 {
		m.n.metrics.Reconnects.Add(1)
		m.n.log.Info("rejoined a member that restarted", "gossip_addr", addr)
		m.signal()
	} else if !m.joinRefused(err, []string{addr}) && err != nil {
		m.n.log.Debug("rejoining a member that restarted failed", "gossip_addr", addr, "err", err)
	}
}
