package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Bounds of the pulls of a member's state for incarnations its deltas name
// that this node has not heard of: at most one a relayPullEvery per
// member, each within relayPullTimeout.
const (
	relayPullEvery   = time.Second
	relayPullTimeout = 5 * time.Second
)

// relayPulls are the node's pulls of members' state for incarnations it
// had not heard of: the last one of each member, done or under way.
type relayPulls struct {
	mu    sync.Mutex
	pulls map[string]*relayPull // by member name
}

// relayPull is one pull of a member's state; done is closed once it ends.
type relayPull struct {
	at   time.Time
	done chan struct{}
}

// begin returns the pull of name's state to wait for, and whether the
// caller is to make it: a new one, unless one is under way (to wait for)
// or ended less than relayPullEvery before now (nil: none to wait for).
func (r *relayPulls) begin(name string, now time.Time) (*relayPull, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pulls[name]; p != nil {
		select {
		case <-p.done:
			if now.Sub(p.at) < relayPullEvery {
				return nil, false
			}
		default:
			return p, false
		}
	}
	if r.pulls == nil {
		r.pulls = map[string]*relayPull{}
	}
	for k, p := range r.pulls {
		select {
		case <-p.done:
			if now.Sub(p.at) >= relayPullEvery {
				delete(r.pulls, k)
			}
		default:
		}
	}
	p := &relayPull{at: now, done: make(chan struct{})}
	r.pulls[name] = p
	return p, true
}

// learnIncarnations pulls the state of member name, whose delta names
// incarnations this node has not heard of, before the delta is merged. A
// delta a peer sends unasked passes on counts only of incarnations this
// node knows of (see counter.UnknownIncarnation), so that a forged one
// cannot make up incarnations to count. But a real node passes on counts
// of incarnations another may never have heard of: its own earlier run,
// whose counts a restarted node's peers hand it as the owner of its keys
// again, perhaps before its start-up pull is done; one that lived and died
// while this node was cut off. A state pull names every incarnation its
// sender has heard of, and is taken whole, as a joining node takes it: it
// comes over a connection this node makes to the address gossip gives for
// the member, so a forger that takes a member's name only makes this node
// learn what that member really knows. At most one pull a relayPullEvery
// per member: a forged delta that names made-up incarnations costs a pull
// at most that often, and is then rejected.
//
// A delta that finds a pull of its sender's state under way waits for it
// (or for ctx to end). The pull itself is the node's, not the stream's:
// it goes on if the stream that asked for it ends.
func (n *Node) learnIncarnations(ctx context.Context, name string) {
	if n.members == nil {
		return
	}
	p, mine := n.relays.begin(name, time.Now())
	if !mine {
		if p != nil {
			select {
			case <-p.done:
			case <-ctx.Done():
			}
		}
		return
	}
	defer close(p.done)
	pctx, cancel := context.WithTimeout(n.peers.ctx, relayPullTimeout)
	defer cancel()
	got, err := n.pullMember(pctx, name)
	if err != nil {
		n.log.Debug("pulling the state of a member that named incarnations this node had not heard of", "peer", name, "err", err)
		return
	}
	n.log.Info("pulled the state of a member that named incarnations this node had not heard of", "peer", name, "entries", got)
}

// pullMember pulls the state of the member named name: over the connection
// to it as a peer, or, for a member gossip has told of that the peer set
// does not hold yet, over one made for the pull alone.
func (n *Node) pullMember(ctx context.Context, name string) (int, error) {
	if p := n.peers.byName(name); p != nil {
		return n.pullFrom(ctx, p.conn)
	}
	n.members.knownMu.Lock()
	c, ok := n.members.known[name]
	n.members.knownMu.Unlock()
	if !ok || !c.hasMeta {
		return 0, fmt.Errorf("%q is no member gossip lists", name)
	}
	conn, err := n.peers.dial(c.grpcAddr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return n.pullFrom(ctx, conn)
}
