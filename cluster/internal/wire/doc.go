// Package wire puts a node's counter deltas and rules on the wire and reads
// them back: the sluice.v1 messages that peers sync (Delta), that a node
// saves (its counts and views) and that strict mode writes into its Raft
// log and snapshots (RuleSet, and Delta inside StrictBatch and
// StrictSnapshot). Every decoder checks what it reads and never panics on
// a malformed or hostile message.
//
// It is shared by package cluster, which syncs and saves deltas, and
// cluster/strict, which logs them; neither imports the other.
package wire
