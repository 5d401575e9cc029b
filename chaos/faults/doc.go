// Package faults runs fault scenarios on real sluice nodes: a Fleet of
// in-process cluster.Nodes on one faultnet switchboard, a Load that drives
// checks at them from concurrent callers and records every answer, and
// the checks the scenarios make of those records: admissions per window
// (Count), and the linearizability of strict decisions (CheckLinearizable,
// the porcupine model cluster's own tests use).
//
// The scenarios themselves are this package's tests; chaos/README.md lists
// each with the bound it asserts and the figures it measured.
package faults
