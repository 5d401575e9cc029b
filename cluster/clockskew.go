package cluster

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/window"
)

// Bounds of the clock-offset tolerance: half the smallest window of the
// node's rules, within these.
const (
	minSkewTolerance = 100 * time.Millisecond
	maxSkewTolerance = 5 * time.Second
)

// skewWatch estimates each peer's clock offset from the send time on its
// deltas and finds a node whose clock is off. Windows are epoch-aligned, so
// a node whose clock is off by more than a window counts in windows its
// peers have closed or not yet opened: its admissions would not reach their
// views, nor theirs its view. A node whose clock disagrees with the median
// of the fleet's by more than the tolerance decides on the fleet's clock
// instead, and says so.
type skewWatch struct {
	tolerance atomic.Int64 // nanoseconds
	fix       atomic.Int64 // added to the node's own clock, nanoseconds

	mu      sync.Mutex
	samples map[string]*offsetSamples // peer name → its recent offsets
	offsets map[string]int64          // peer name → its clock minus ours, estimated
	skewed  map[string]bool           // peers beyond the tolerance of the fleet's clock
}

// offsetSamples are a peer's offsets over the last offsetHorizon, by the
// moment they arrived. A delta held up on the way (a slow peer, a stream
// stalled on a lost segment, a node starved of CPU that reads its deltas
// late, a clock that stepped while it travelled) shows an offset smaller by
// the delay; the largest is the one least delayed, as NTP keeps the sample
// of least delay. The horizon is time, not a number of samples: a stall
// holds up every delta for as long as it lasts, however many there are, and
// one prompt delta in the horizon outweighs them all. The price is that a
// peer whose clock steps back is seen to be behind only once its earlier
// samples leave the horizon.
//
// An estimate also needs samples from offsetSpread of the horizon's
// buckets: after a partition longer than the horizon, the deltas queued
// during it arrive together, all late by the partition's length, and one
// moment's worth of them is no evidence of a clock; the estimate from
// before stands until the prompt deltas that follow fill the horizon.
type offsetSamples struct {
	best [offsetBuckets]int64 // the largest offset that arrived in each bucket
	at   [offsetBuckets]int64 // the bucket each holds: arrival time ÷ offsetBucket, 0 for none
}

// The offset horizon is offsetBuckets buckets of offsetBucket each.
// offsetSpread is how many of them must hold samples for an estimate.
const (
	offsetBucket  = time.Second
	offsetBuckets = 8
	offsetHorizon = offsetBuckets * offsetBucket
	offsetSpread  = offsetBuckets / 2
)

// add records offset v, which arrived at moment now of this node's own
// clock, and returns the peer's estimated offset, the largest in the
// horizon, or false while the horizon holds samples of fewer than
// offsetSpread buckets.
func (o *offsetSamples) add(v, now int64) (int64, bool) {
	b := now/int64(offsetBucket) + 1 // never 0
	i := b % offsetBuckets
	if o.at[i] != b {
		o.at[i], o.best[i] = b, v
	} else {
		o.best[i] = max(o.best[i], v)
	}
	best, spread := v, 0
	for j := range o.best {
		// Buckets from after now are of a clock that has since stepped
		// back: what they hold is no guide to the offset now.
		if age := b - o.at[j]; o.at[j] != 0 && age >= 0 && age < offsetBuckets {
			best = max(best, o.best[j])
			spread++
		}
	}
	return best, spread >= offsetSpread
}

func newSkewWatch(rules []window.Rule) *skewWatch {
	w := &skewWatch{samples: map[string]*offsetSamples{}, offsets: map[string]int64{}, skewed: map[string]bool{}}
	w.setRules(rules)
	return w
}

// setRules sets the tolerance from the node's rules.
func (w *skewWatch) setRules(rules []window.Rule) {
	smallest := maxSkewTolerance * 2
	for _, r := range rules {
		smallest = min(smallest, r.Window)
	}
	w.tolerance.Store(int64(min(max(smallest/2, minSkewTolerance), maxSkewTolerance)))
}

// skewReport is what one observation changed, for the node to log.
type skewReport struct {
	peerSkewed, peerBack bool  // the peer crossed the tolerance
	fixChanged           bool  // this node's correction changed
	offset, fix          int64 // the peer's offset and the new correction
	skewedPeers          int
}

// observe records a peer's send time against this node's own clock
// reading at receipt (both uncorrected), and returns what changed. An
// offset includes the one-way delay; the estimate keeps the least delayed
// of the peer's samples over the last offsetHorizon.
func (w *skewWatch) observe(peer string, sentAt, ownNow int64) skewReport {
	if sentAt == 0 {
		return skewReport{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.samples[peer]
	if o == nil {
		o = &offsetSamples{}
		w.samples[peer] = o
	}
	if off, ok := o.add(sentAt-ownNow, ownNow); ok {
		w.offsets[peer] = off
	} else if _, known := w.offsets[peer]; !known {
		return skewReport{fix: w.fix.Load(), skewedPeers: len(w.skewed)}
	}
	return w.recompute(peer)
}

// forget drops a peer that left.
func (w *skewWatch) forget(peer string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.samples, peer)
	delete(w.offsets, peer)
	delete(w.skewed, peer)
	w.recompute("")
}

// recompute sets the correction to the median of every clock's offset from
// this one's (this one's own is 0) when that median is beyond the
// tolerance and at least two peers vote: a lone peer cannot tell which of
// two clocks is off.
func (w *skewWatch) recompute(peer string) skewReport {
	tol := w.tolerance.Load()
	all := make([]int64, 0, len(w.offsets)+1)
	all = append(all, 0)
	for _, o := range w.offsets {
		all = append(all, o)
	}
	slices.Sort(all)
	median := all[len(all)/2]
	fix := int64(0)
	if len(w.offsets) >= 2 && abs64(median) > tol {
		fix = median
	}
	var r skewReport
	if old := w.fix.Swap(fix); old != fix {
		r.fixChanged = true
	}
	r.fix = fix
	if peer != "" {
		// A peer is skewed when it is off from the fleet's clock: this
		// node's own, corrected.
		off := w.offsets[peer] - fix
		r.offset = off
		now := abs64(off) > tol
		switch {
		case now && !w.skewed[peer]:
			r.peerSkewed = true
		case !now && w.skewed[peer]:
			r.peerBack = true
		}
		if now {
			w.skewed[peer] = true
		} else {
			delete(w.skewed, peer)
		}
	}
	r.skewedPeers = len(w.skewed)
	return r
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// noteSkew records a peer's send time and reports what changed.
func (n *Node) noteSkew(peer string, sentAt int64) {
	r := n.skew.observe(peer, sentAt, n.ownNow())
	n.metrics.SkewedPeers.Store(int64(r.skewedPeers))
	n.metrics.ClockCorrection.Store(r.fix)
	switch {
	case r.peerSkewed:
		n.log.Warn("a peer's clock is off from the fleet's; its counts fall in other windows", "peer", peer,
			"offset", time.Duration(r.offset), "tolerance", time.Duration(n.skew.tolerance.Load()))
	case r.peerBack:
		n.log.Info("a peer's clock agrees with the fleet's again", "peer", peer, "offset", time.Duration(r.offset))
	}
	if r.fixChanged {
		n.replica.ClockStepped(n.now())
		n.rescheduleTicks()
		if r.fix != 0 {
			n.log.Warn("this node's clock is off from the fleet's; deciding on the fleet's clock", "correction", time.Duration(r.fix))
		} else {
			n.log.Info("this node's clock agrees with the fleet's again")
		}
	}
}
