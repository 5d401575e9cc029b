package cluster

import "github.com/sluicehq/sluice/counter"

// sendInOrder numbers o, a delta the replica built outside a sync round (a
// question to a key's owner, an owner's answer), and queues it for its
// peer, at node-clock time at. A question's flight f takes the number o
// is given before o is queued, so that no answer to it can come first; an
// answer passes nil.
//
// A delta is numbered when the replica builds it, and a sync round may be
// built and queued between the moment a check builds its question and the
// moment the check queues it. The owner would then receive the round's
// report, numbered after the question, first, and take the question for
// stale: the check refused, told to come back a sync interval later, with
// room left in the fleet. Numbered again under the lock every sync round
// is queued under, o reaches its peer after everything queued before it
// and before anything numbered after it.
func (n *Node) sendInOrder(o *counter.Outbound, at int64, f *flight) {
	n.sendOrder.Lock()
	defer n.sendOrder.Unlock()
	seq := n.replica.Renumber(o, at)
	if f != nil {
		n.borrows.numbered(f, seq)
	}
	n.peers.send([]counter.Outbound{*o}, at)
}
