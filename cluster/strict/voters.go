package strict

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/connectivity"
)

// reconcileLoop keeps, while this node leads, the log's rules in line with
// the node's configuration and the voter set at the configured size from
// live members, replacing voters that stay dead; and, while no group exists,
// lets the lowest-named member bootstrap one.
//
// A change wakes it at once (changes): this node elected, so it writes its
// rules before any check needs them; leadership lost, so it looks for a
// lost majority; the group's peers or the live members changed. The ticker
// is for what no event announces: a grace period running out
// (deadVoterGrace, strict_bootstrap_wait), counts admitted outside the log
// to import, and a step that failed and must be tried again (an AddVoter
// that timed out, a probe a peer did not answer, a rule change Raft did
// not commit).
func (g *strictGroup) reconcileLoop(ctx context.Context) {
	tick := time.NewTicker(reconcileInterval)
	defer tick.Stop()
	changed := g.changes.changed()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-changed:
		}
		// Taken before the work: a change while it runs wakes the next
		// round.
		changed = g.changes.changed()
		switch {
		case g.raft.State() == raft.Leader:
			g.syncRules(ctx)
			g.importOutside(ctx)
			if g.e.set.Clustered {
				g.reconcile()
			}
		case g.e.set.Clustered:
			if conf, lost := g.lostMajority(); lost {
				g.e.recoverStrict(g, conf)
				return
			}
			g.maybeBootstrap(ctx)
		}
	}
}

// reconcileInterval is how often reconcileLoop runs when nothing wakes it.
const reconcileInterval = 250 * time.Millisecond

// strictMember is a live member that takes part in strict mode.
type strictMember struct {
	name     string
	id       raft.ServerID
	raftAddr string
}

// raftServerID is a node's server ID in the strict group. A node whose log
// survives restarts (it has a data dir) keeps its name. A node that keeps
// its log in memory gets a new ID each boot: it forgets its log and its vote
// when it restarts, and Raft's safety rests on a voter never forgetting
// either. Coming back under its old ID it could hand a candidate that lacks
// an acknowledged admission the vote that elects it; as a new member it is
// only added by a leader, which holds every committed entry.
func raftServerID(name string, boot uint64, durable bool) raft.ServerID {
	if durable {
		return raft.ServerID(name)
	}
	return raft.ServerID(fmt.Sprintf("%s%s%016x", name, bootSeparator, boot))
}

// bootSeparator joins a node's name and its boot in a per-boot server ID.
const bootSeparator = "#"

// serverName is the node name a server ID stands for.
func serverName(id raft.ServerID) string {
	s := string(id)
	i := strings.LastIndex(s, bootSeparator)
	if i < 0 || len(s)-i-len(bootSeparator) != 16 {
		return s
	}
	if _, err := strconv.ParseUint(s[i+len(bootSeparator):], 16, 64); err != nil {
		return s
	}
	return s[:i]
}

func (g *strictGroup) liveMembers() []strictMember {
	out := []strictMember{{name: g.e.set.Name, id: g.id, raftAddr: g.addr}}
	for _, p := range g.e.h.Peers() {
		if p.RaftAddr != "" {
			out = append(out, strictMember{name: p.Name, id: raft.ServerID(p.RaftID), raftAddr: p.RaftAddr})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// superseded reports whether server id belongs to a node that has since
// restarted without its log: a live member of that name now runs under
// another ID, so id will never answer again.
func superseded(id raft.ServerID, current map[string]raft.ServerID) bool {
	now, ok := current[serverName(id)]
	return ok && now != id
}

// currentIDs maps each live member's name to the server ID it runs under.
func currentIDs(members []strictMember) map[string]raft.ServerID {
	out := make(map[string]raft.ServerID, len(members))
	for _, m := range members {
		out[m.name] = m.id
	}
	return out
}

func (g *strictGroup) reconcile() {
	cf := g.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	members := g.liveMembers()
	current := currentIDs(members)
	live := map[raft.ServerID]bool{}
	for _, m := range members {
		live[m.id] = true
	}
	want := g.e.set.Voters
	voters := 0
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range cf.Configuration().Servers {
		switch {
		case live[s.ID]:
			// A voter restarted on another address stays as it is in the
			// configuration: the transport dials it where gossip says it
			// is (gossipRaftAddrs). Rewriting its address would race inside
			// raft's replication (hashicorp/raft reads a follower's peer
			// without the lock that guards the rewrite).
			delete(g.deadSeen, s.ID)
			voters++
		case superseded(s.ID, current):
			// No grace: the member it was is gone for good, and each voter
			// that cannot answer brings the group closer to losing its
			// majority. Its new self is added below.
			g.e.log.Info("replacing a strict voter that restarted without its log", "voter", s.ID,
				"now", current[serverName(s.ID)])
			if err := g.raft.RemoveServer(s.ID, 0, time.Second).Error(); err == nil {
				delete(g.deadSeen, s.ID)
			} else {
				voters++
			}
		default:
			since, seen := g.deadSeen[s.ID]
			if !seen {
				g.deadSeen[s.ID] = now
				voters++
				continue
			}
			if now.Sub(since) < deadVoterGrace {
				voters++
				continue
			}
			g.e.log.Warn("removing a strict voter that stayed dead", "voter", s.ID)
			if err := g.raft.RemoveServer(s.ID, 0, time.Second).Error(); err == nil {
				delete(g.deadSeen, s.ID)
			} else {
				voters++
			}
		}
	}
	in := map[raft.ServerID]bool{}
	for _, s := range cf.Configuration().Servers {
		in[s.ID] = true
	}
	for _, m := range members {
		if voters >= want {
			break
		}
		if in[m.id] {
			continue
		}
		if p, ok := g.e.peerByRaftID(string(m.id)); !ok || p.Conn.GetState() != connectivity.Ready {
			// Not while this node holds no working connection to it: a
			// member it cannot reach (cut off, or with a certificate it
			// refuses) would be a voter that never answers. A member
			// that just joined is tried again at the next round.
			continue
		}
		if err := g.raft.AddVoter(m.id, raft.ServerAddress(m.raftAddr), 0, time.Second).Error(); err != nil {
			g.e.log.Debug("adding a strict voter failed", "member", m.name, "err", err)
			continue
		}
		g.e.log.Info("strict voter added", "member", m.name, "raft_id", m.id, "raft_addr", m.raftAddr)
		voters++
	}
}

// maybeBootstrap starts a group when none exists: only the lowest-named live
// member does, and only when no peer knows of a leader.
func (g *strictGroup) maybeBootstrap(ctx context.Context) {
	if addr, _ := g.raft.LeaderWithID(); addr != "" || g.hasGroup.Load() {
		return
	}
	cf := g.raft.GetConfiguration()
	if cf.Error() == nil && len(cf.Configuration().Servers) > 0 {
		return // already part of a group, waiting for an election
	}
	members := g.liveMembers()
	if members[0].name != g.e.set.Name {
		return
	}
	// Membership may still be converging: the members of a group this
	// node has not heard of yet may be about to find it.
	now := time.Now()
	if key := viewKey(members); key != g.view {
		g.view, g.viewSince = key, now
	}
	if now.Sub(g.viewSince) < g.e.set.BootstrapWait {
		return
	}
	if len(members) == 1 && now.Sub(g.started) < g.aloneGrace() {
		// Alone, this node cannot tell a new fleet from one that lost
		// sight of it: a node restarted without a data dir, or a seed
		// with no seeds of its own, has forgotten the group its peers
		// still run. They find it at their first ping of it, or by their
		// reconnect loop (see aloneGrace).
		return
	}
	for _, p := range g.e.h.Peers() {
		if p.RaftAddr == "" {
			continue
		}
		nl, err := probe(ctx, p, 500*time.Millisecond)
		// Only a peer's word that it has no group lets this node start
		// one: a peer that leads, knows a leader, is electing or cannot
		// be asked may belong to a group already; so may a peer that
		// predates NotLeader, which gives no word this node reads.
		if err != nil || nl == nil || nl.GetLeader() != "" || nl.GetInGroup() {
			return
		}
	}
	g.bootstrap()
}

// viewKey identifies a set of members and their server IDs.
func viewKey(members []strictMember) string {
	var b strings.Builder
	for _, m := range members {
		b.WriteString(m.name)
		b.WriteByte(0)
		b.WriteString(string(m.id))
		b.WriteByte(0)
	}
	return b.String()
}

// aloneGrace is how long after its start a node that sees no other member
// waits before it starts a group of its own: long enough for the members
// of a group it belonged to to find it again, by the first ping that finds
// it restarted (StrictBootstrapWait) or, if they had given it up for dead,
// by their reconnect loop (one interval, and a margin for the join).
func (g *strictGroup) aloneGrace() time.Duration {
	return max(g.e.set.BootstrapWait, g.e.set.ReconnectInterval+2*time.Second)
}
