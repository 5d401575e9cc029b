// Package sluicev1 is the generated Go code for the sluice.v1 gRPC API: the
// Limiter service that answers rate-limit checks and says what a node
// enforces (limiter.proto: Check, CheckBatch, Rules), and the services nodes
// serve each other: Peer for counts (peer.proto) and Strict for checks
// forwarded to the strict leader, with the Raft log's entries (strict.proto).
//
// Regenerate with `make proto` after editing a .proto file; do not edit the
// *.pb.go files by hand. Changes keep the wire compatible with running
// nodes: new fields take new numbers.
package sluicev1
