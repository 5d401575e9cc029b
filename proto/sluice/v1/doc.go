// Package sluicev1 is the generated Go code for the sluice.v1 gRPC API
// (limiter.proto): the Limiter service that answers rate-limit checks
// (Check, CheckBatch) and its request and response messages.
//
// Regenerate with `make proto` after editing limiter.proto; do not edit the
// *.pb.go files by hand.
package sluicev1
