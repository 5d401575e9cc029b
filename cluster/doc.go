// Package cluster runs a sluice node: the embedding API (Start, Allow,
// Close), the clock and the loops that drive the pure counter table, and
// everything that talks to peers and clients.
package cluster
