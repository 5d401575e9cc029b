package faults

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/window"
)

// Tally is admitted hits per window index, per node.
type Tally map[int64]map[string]int64

// Count tallies the admitted hits of rule among recs in windows of w,
// placing each decision in window when(r) / w; keep, if set, picks the
// records to count.
func Count(recs []Record, rule string, w time.Duration, when func(Record) int64, keep func(Record) bool) Tally {
	t := Tally{}
	for _, r := range recs {
		if r.Rule != rule || !r.Admitted() || (keep != nil && !keep(r)) {
			continue
		}
		idx := window.Index(when(r), w)
		if t[idx] == nil {
			t[idx] = map[string]int64{}
		}
		t[idx][r.Node] += r.Hits
	}
	return t
}

// DecidedAt places a decision at the time its node made it, on that
// node's clock: the window the node counted it in.
func DecidedAt(r Record) int64 { return r.D.At }

// Windows returns the tally's window indexes in order.
func (t Tally) Windows() []int64 {
	var idx []int64
	for i := range t {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}

// Sum returns what nodes admitted in window idx; no nodes means all.
func (t Tally) Sum(idx int64, nodes ...string) int64 {
	var n int64
	for node, v := range t[idx] {
		if len(nodes) == 0 || slices.Contains(nodes, node) {
			n += v
		}
	}
	return n
}

// Worst returns the window where nodes admitted the most, and how much.
func (t Tally) Worst(nodes ...string) (idx, admitted int64) {
	for _, i := range t.Windows() {
		if s := t.Sum(i, nodes...); s > admitted {
			idx, admitted = i, s
		}
	}
	return idx, admitted
}

// admittedBy sums the admitted hits of rule and key among recs that keep
// picks (nil: all).
func admittedBy(recs []Record, rule, key string, keep func(Record) bool) int64 {
	var n int64
	for _, r := range recs {
		if r.Rule == rule && r.Key == key && r.Admitted() && (keep == nil || keep(r)) {
			n += r.Hits
		}
	}
	return n
}
