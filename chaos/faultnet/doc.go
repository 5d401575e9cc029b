// Package faultnet is a switchboard that carries the traffic of real
// in-process sluice nodes and breaks it on demand: it partitions them, drops
// and delays what they send, and skews their clocks.
//
// A test makes one Switchboard and gives every node its own view of it,
// sb.Node(name), as cluster.Config.Network, and sb.Clock(name) as
// cluster.Config.Now. The view is what lets the switchboard know the source
// of every dial and packet; it learns which node owns an address from that
// node's Listen and Gossip calls.
//
// What a node sees:
//
//   - Streams (gRPC, Raft, memberlist's push-pull) are real TCP connections
//     on 127.0.0.1. Reads come straight from the socket; each write is queued
//     and a pump delivers it to the socket when the link allows: after the
//     link's one-way delay, in order, and not while the link is cut. Loss on
//     a stream is what TCP makes of it: a lost segment is retransmitted
//     after a retransmission timeout (200 ms plus the round trip, doubling),
//     so the bytes arrive late, never corrupted or out of order.
//   - A partition stalls a stream across the cut, as a real one does until
//     TCP gives up: writes return (the data waits in the send queue) and
//     the peer hears nothing until the cut heals, when the queue drains.
//     Nodes notice through their own timeouts: memberlist's probes, Raft's
//     RPC deadlines, a gRPC call's deadline, as on a real network. Closing
//     a stalled stream does not reach the peer until the cut heals either.
//   - A new dial across a cut blocks like a SYN that is never answered, until
//     the dial's context ends (or the cut heals first, when it connects).
//   - Gossip packets are carried in memory between the nodes' memberlist
//     transports, addressed by the same 127.0.0.1 host and port as their
//     stream listeners. A packet across a cut is dropped; Drop drops a
//     fraction of them, from a seeded random source; Delay holds them.
//
// Partition(groups...) names who can reach whom: nodes in different groups
// cannot, and a node named in no group is alone (it reaches nobody). Heal
// clears partitions, drops and delays; clock skews stay until set again.
//
// Runs are seeded: New(seed) draws every random choice (which packets and
// segments are lost) from seed, and SeedFromEnv reads FAULTNET_SEED so a
// failing run can be replayed. Goroutine interleaving is not replayed, so a
// replay repeats the schedule of faults, not every byte.
//
// Close releases everything the switchboard started: listeners, streams,
// the packet scheduler and the goroutines that pump streams.
package faultnet
