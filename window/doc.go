// Package window holds the rate-limit window math: what a rule means, which
// window a moment falls in, and whether a request fits.
//
// It is pure: it reads no clock, starts no goroutine and does no I/O. Every
// function takes the time as an argument (Unix nanoseconds), so the same code
// serves the single-node limiter, the batched cluster, the Raft state machine
// and the deterministic simulator.
package window
