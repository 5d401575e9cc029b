// Package netns partitions real `sluice agent` processes from each other:
// each agent runs in its own Linux network namespace, wired to the others
// through a bridge in a namespace of its own, so that taking one veth down
// cuts that agent off while the host's own network is never touched. The
// test in this package needs root and iproute2 (`ip netns`) and skips
// without them; README.md says what it asserts.
package netns
