// Package chaos is where sluice is tested against faults and time itself.
//
//   - chaos/sim is a deterministic discrete-event simulator: N nodes, the
//     batched sync protocol and the allocation policies of counter, driven
//     in virtual time.
//   - chaos/bench runs the same scenarios on real in-process clusters
//     (memberlist and gRPC over loopback) in wall-clock time, and measures
//     throughput and latency.
//   - chaos/faultnet is a switchboard for real in-process nodes: their
//     streams, Raft transport and gossip go through it, and it partitions
//     them, drops and delays their traffic, and skews their clocks.
//   - chaos/faults runs fault scenarios on real nodes over faultnet:
//     partitions, lossy links, a strict leader cut off, crashes and
//     restarts, clock skew, and a seeded random schedule of all of them,
//     each test asserting the bound it states. chaos/README.md lists them
//     with the figures they measured.
//
// This package itself holds no code.
package chaos
