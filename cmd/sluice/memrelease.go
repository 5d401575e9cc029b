package main

import (
	"runtime/debug"
	"time"
)

// memReleaser gives the memory of keys the node dropped back to the
// system: once the node holds a good many fewer keys than it did (their
// windows passed, as after a flood of keys once it has expired), it calls
// debug.FreeOSMemory. Without it, an idle agent keeps the memory of keys
// long gone: no allocation triggers the collection that would free it,
// Go forces one only every two minutes, and returns freed memory to the
// system gradually.
type memReleaser struct {
	keys    func() int // the keys the node holds
	release func()     // debug.FreeOSMemory
	every   time.Duration
	stop    chan struct{}
	done    chan struct{}
}

// Defaults of the agent's memReleaser.
const (
	// releaseEvery is how often it reads the node's keys: a node sweeps
	// expired keys once a window at most, and counting its keys takes no
	// lock.
	releaseEvery = time.Second
	// releaseDrop is the fewest keys dropped since the last peak that call
	// for a release: some 30 MB; and a quarter of the peak at least.
	releaseDrop = 100_000
)

// startMemReleaser starts a releaser of the memory of keys, which runs
// until stopped.
func startMemReleaser(keys func() int, release func(), every time.Duration) *memReleaser {
	m := &memReleaser{keys: keys, release: release, every: every, stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *memReleaser) run() {
	defer close(m.done)
	t := time.NewTicker(m.every)
	defer t.Stop()
	peak := m.keys()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		n := m.keys()
		peak = max(peak, n)
		if drop := peak - n; drop >= releaseDrop && drop >= peak/4 {
			m.release()
			peak = n
		}
	}
}

// Stop stops the releaser and waits for it.
func (m *memReleaser) Stop() {
	close(m.stop)
	<-m.done
}

// freeOSMemory is the release the agent uses.
func freeOSMemory() { debug.FreeOSMemory() }
