// Package chaos is where sluice is tested against faults and time itself:
// the deterministic simulator lives in chaos/sim, and the scenarios that
// partition peers, crash nodes and skew clocks build on it.
package chaos
