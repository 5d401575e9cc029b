// Package strict is sluice's strict mode: rules whose every check is
// decided through a Raft log (hashicorp/raft over the badger store of
// store/raftstore), whose state machine is the exact counter table, so that
// a fleet never admits more than a rule's count.
//
// A node runs strict mode only when its embedder asks for it:
//
//	node, err := cluster.Start(ctx, cluster.Config{
//		Rules:  []window.Rule{{Name: "pay", Count: 10, Window: time.Minute, SyncInterval: window.Strict}},
//		Strict: strict.Mode{},
//	})
//
// Without Config.Strict a strict rule fails Start and Reload with
// cluster.ErrStrictNotEnabled, and the program links no Raft.
//
// # How it works
//
// A group of cluster.Config.StrictVoters members votes; the leader packs
// the checks that arrive while an entry is in flight into the next one
// (group commit), and other nodes forward their checks to it over the
// Strict gRPC service. Every replica decides an entry's checks alike, at
// the time the leader stamped on it (fsm.go). When no leader answers
// within a check's deadline the rule's fail mode answers (check.go). The
// leader keeps the log's rules in line with its own configuration and the
// voter set at its size from the live members (rules.go, voters.go), and
// the voters left rebuild a group whose majority restarted without their
// logs (recover.go).
//
// The package talks to its node only through the interfaces of
// cluster/internal/strictapi: package cluster does not import it, and it
// does not import cluster.
//
// At about 2,300 lines the package is one job, the Raft group of a node,
// kept in files by part: the check path (check.go, batch.go, forward.go),
// the state machine (fsm.go), the group's life (group.go, voters.go,
// recover.go, watch.go) and its transport (transport.go, service.go).
package strict
