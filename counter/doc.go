// Package counter is the windowed CRDT counter table: every node's view of
// how many hits each (rule, key, window) has taken, and the batched sync
// protocol that keeps those views close.
//
// State per (rule, key, window index) is a G-counter with one entry per node
// incarnation. Merging is a per-entry maximum, so duplicated, reordered or
// replayed deltas are harmless. A Replica is one node's whole view: it decides
// admission from its own exact counts plus each peer's last report, says
// which deltas are due to whom as time passes, and merges what arrives.
//
// Like package window, counter is pure: it reads no clock, starts no
// goroutine and touches no network. The cluster drives it with wall-clock
// time and gRPC; the simulator drives the very same code with virtual time.
package counter
