// Package counter is the windowed CRDT counter table: every node's view of
// how many hits each (rule, key, window) has taken, and the batched sync
// protocol that keeps those views close.
//
// State per (rule, key, window index) is a G-counter with one entry per node
// incarnation. Merging is a per-entry maximum, so duplicated, reordered or
// replayed deltas are harmless. A Replica is one node's whole view: it decides
// admission from its own exact counts plus each peer's last report, says
// which deltas are due to whom as time passes, and merges what arrives,
// each entry vetted first (vet.go): one that names an incarnation it has
// not heard of, is for a window too far ahead, or says more than could
// have been admitted is rejected and changes nothing.
//
// Under owner allocation (the default) each key also has an owner among the
// nodes that share its rule (owner.go, route.go): the others report their
// counts to it alone (report.go), and it keeps a book per key with an
// account per contributor (book.go, account.go) from which it grants each
// its part, growing with time where a sliding window decays (line.go,
// lease.go). The classic and adaptive policies (classic.go, adaptive.go)
// divide a count without owners.
//
// The package is larger than the others (about 4,400 lines) because those
// policies share one state: a key's counts, claims and grants live in one
// table entry (table.go, slot.go) that admission, sync and allocation all
// read and write under the same lock. Split along the policies, each part
// would reach into the others' state; what stays small is each file.
//
// A replica holds at most Config.MaxKeys keys, its rules' together,
// whoever brings them; past it a new key evicts one (keycap.go).
//
// Like package window, counter is pure: it reads no clock, starts no
// goroutine and touches no network. The cluster drives it with wall-clock
// time and gRPC; the simulator drives the very same code with virtual time.
package counter
