// Package metric holds the lock-free latency histogram that a node and its
// strict mode update as they work and that a scrape reads: package cluster
// exports what it holds, and package cluster/prom turns that into
// Prometheus metrics, so that neither the node nor its strict mode links a
// metrics library.
package metric

import "sync/atomic"

// Bounds is how many buckets a histogram has below its last, unbounded
// one.
const Bounds = 20

// Bound returns the upper bound of bucket i (0 ≤ i < Bounds), in
// nanoseconds: 1 µs to 2.5 s in steps of 1, 2.5 and 5, which covers a
// local check (microseconds), a round trip to a key's owner or a strict
// leader (a LAN's to a region's milliseconds) and a check that waits out
// its timeout.
func Bound(i int) int64 {
	steps := [3]int64{10, 25, 50}
	b := int64(100) * steps[i%3]
	for range i / 3 {
		b *= 10
	}
	return b
}

// Histogram counts observations, in nanoseconds, by bucket. Its zero value
// is empty and ready; it is safe for concurrent use.
type Histogram struct {
	counts [Bounds + 1]atomic.Uint64 // the last is above every bound
	sum    atomic.Int64
}

// Observe adds one observation of ns nanoseconds; a negative one (a clock
// stepped back) counts as 0.
func (h *Histogram) Observe(ns int64) {
	ns = max(ns, 0)
	i := 0
	for b := int64(1000); i < Bounds && ns > b; i++ {
		// Bound(i+1) from Bound(i): ×2.5, ×2, ×2 over each decade.
		if i%3 == 0 {
			b = b * 5 / 2
		} else {
			b *= 2
		}
	}
	h.counts[i].Add(1)
	h.sum.Add(ns)
}

// Snapshot is a histogram as of one moment.
type Snapshot struct {
	// Counts are the observations per bucket, not cumulative; the last
	// is those above every bound.
	Counts [Bounds + 1]uint64
	// Count is their total and Sum the sum of the observations, in
	// nanoseconds.
	Count uint64
	Sum   int64
}

// Snapshot reads the histogram. Its buckets are read one by one while
// observations may go on, so Count is their sum rather than a figure of
// its own, and the buckets always add up to it.
func (h *Histogram) Snapshot() Snapshot {
	var s Snapshot
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
		s.Count += s.Counts[i]
	}
	s.Sum = h.sum.Load()
	return s
}
