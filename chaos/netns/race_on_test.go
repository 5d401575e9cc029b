//go:build linux && race

package netns

// raceBuild is whether this test binary has the race detector; the agents
// are then built with it too, so a race in a partitioned node fails the run.
const raceBuild = true
