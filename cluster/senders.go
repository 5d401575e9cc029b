package cluster

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/counter"
)

// departedGrace is how long after gossip drops a member its deltas are
// still taken: a member that leaves sends its last ones as it goes, and
// they may come after the news of its leaving.
const departedGrace = 5 * time.Second

// senderWait is how long a delta from an incarnation gossip does not list
// waits for gossip to tell of it. A node that joins learns the members
// from its seed and streams to them at once, before gossip has told them
// of it; so does a member started again under a new boot. Gossip spreads
// the news in a few rounds (a fraction of a second on a LAN); a sender
// still unknown after this wait is refused with a status the sender's
// stream retries on.
const senderWait = 3 * time.Second

// sender reports whether this node takes deltas from inc: a member as gossip
// lists it (its name and the boot its metadata gives), or one gossip
// dropped less than departedGrace ago; and whether it enforces other rules
// than this node (its rules hash differs).
func (m *membership) sender(inc counter.Incarnation, now time.Time) (ok, otherRules bool) {
	m.knownMu.Lock()
	c, found := m.known[inc.Node]
	m.knownMu.Unlock()
	if found && c.hasMeta && c.inc == inc {
		return true, c.rulesHash != m.n.rulesHash()
	}
	if f, gone := m.reconnect.failedMember(inc.Node); gone && now.Sub(f.since) <= departedGrace {
		if meta, err := decodeMeta(f.meta); err == nil && meta.boot == inc.Boot {
			return true, meta.rulesHash != m.n.rulesHash()
		}
	}
	return false, false
}

// awaitSender is sender, waiting up to within, or until ctx ends, for gossip
// to tell of inc.
func (m *membership) awaitSender(ctx context.Context, inc counter.Incarnation, within time.Duration) (ok, otherRules bool) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		m.knownMu.Lock()
		grew := m.grew
		m.knownMu.Unlock()
		if ok, other := m.sender(inc, time.Now()); ok {
			return true, other
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return false, false
		case <-timer.C:
			return m.sender(inc, time.Now())
		}
	}
}

// syncOrigin vets the sender of a sync delta: a member of the fleet, as
// this node's gossip sees it, waiting up to senderWait for gossip to tell
// of a member that has just joined or started again. It returns what
// stands behind the sender's deltas, or the status that refuses them, and
// whether that is a refusal to count: a node without gossip has no fleet,
// and takes no deltas from anyone; a wait that ends with ctx (the stream
// ended, the node is closing) refuses nothing.
func (n *Node) syncOrigin(ctx context.Context, from counter.Incarnation) (origin counter.Origin, refused bool, err error) {
	if from == n.self {
		return origin, true, status.Error(codes.InvalidArgument, "a node cannot sync with itself")
	}
	if n.members == nil {
		return origin, true, status.Error(codes.FailedPrecondition,
			fmt.Sprintf("delta from %q: this node runs no gossip, so it has no fleet to sync with", from.Node))
	}
	ok, other := n.members.sender(from, time.Now())
	if !ok {
		ok, other = n.members.awaitSender(ctx, from, senderWait)
	}
	if !ok && ctx.Err() != nil {
		return origin, false, status.FromContextError(ctx.Err()).Err()
	}
	if !ok {
		return origin, true, status.Error(codes.Unavailable,
			fmt.Sprintf("delta from %q boot %d: not a member of this node's fleet as its gossip sees it", from.Node, from.Boot))
	}
	return counter.Origin{OtherRules: other}, false, nil
}
