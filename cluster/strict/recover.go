package strict

import (
	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/window"
)

// A voter that keeps its log in memory comes back from a restart as a new
// member (raftServerID), and the leader replaces its old self. When a
// majority of the voters restart before the leader has replaced them, no
// leader can be elected again: the old members that would have to vote
// will never answer. Their logs are gone, so the voters left hold all that
// remains of the group's; they rebuild it from what they hold, as an
// operator would with raft.RecoverCluster, and the leader they elect adds
// the restarted nodes back. Admissions that only the lost voters held are
// forgotten: a group that keeps its logs only in memory cannot promise
// more once most of them are gone.

// lostMajority reports whether a majority of the voters in this node's
// configuration restarted without their logs while it is one that did
// not, and returns the configuration of the voters left.
func (g *strictGroup) lostMajority() (raft.Configuration, bool) {
	if addr, _ := g.raft.LeaderWithID(); addr != "" {
		return raft.Configuration{}, false
	}
	cf := g.raft.GetConfiguration()
	if cf.Error() != nil {
		return raft.Configuration{}, false
	}
	return survivorsOf(cf.Configuration(), g.id, currentIDs(g.liveMembers()))
}

// survivorsOf returns the voters of conf not superseded by a restart
// without their log (current maps each live member's name to its server
// ID), and whether they are too few to elect a leader in conf while self
// is among them.
func survivorsOf(conf raft.Configuration, self raft.ServerID, current map[string]raft.ServerID) (raft.Configuration, bool) {
	voters, selfLeft := 0, false
	var left []raft.Server
	for _, s := range conf.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if superseded(s.ID, current) {
			continue
		}
		if s.ID == self {
			selfLeft = true
		}
		left = append(left, s)
	}
	if !selfLeft || len(left) > voters/2 {
		return raft.Configuration{}, false
	}
	return raft.Configuration{Servers: left}, true
}

// recoverStrict replaces the strict group old, whose majority is lost, with
// a successor recovered to conf on the same transport and stores.
func (e *engine) recoverStrict(old *strictGroup, conf raft.Configuration) {
	e.log.Warn("a majority of the strict voters restarted without their logs; rebuilding the group from the voters left",
		"voters_left", len(conf.Servers))
	e.wg.Go(func() {
		old.haltOnce.Do(func() { close(old.halt) })
		old.shutdown()
		<-old.ran
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.ctx.Err() != nil {
			return // stopping: Close releases old
		}
		g, err := old.successor(e.rules, conf)
		if err != nil {
			e.log.Error("the strict group could not be rebuilt; strict rules answer by their fail_mode", "err", err)
			return
		}
		e.c.StrictRecoveries.Add(1)
		e.group.Store(g)
		e.runGroup(g)
	})
}

// successor is a group on g's transport and stores, recovered to conf,
// which takes them over: closing g no longer releases them. g must have
// shut down.
func (g *strictGroup) successor(rules []window.Rule, conf raft.Configuration) (*strictGroup, error) {
	next := newGroupShell(g.e, rules)
	next.id, next.addr, next.started, next.logs, next.ownLogs, next.snaps, next.trans, next.closer =
		g.id, g.addr, g.started, g.logs, g.ownLogs, g.snaps, g.trans, g.closer
	next.hasGroup.Store(true)
	if err := next.openRaft(&conf); err != nil {
		return nil, err
	}
	g.ownLogs, g.closer = false, nil
	return next, nil
}
