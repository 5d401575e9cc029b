package faults

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestSmallCountFarApart runs 8 nodes 50 ms apart (one way, every link)
// sharing a count of 12 per node per second on one key, with demand of 20
// per node per second: a count small enough that every node asks the key's
// owner for hits past its grant, and owners a round trip of 100 ms away.
// Every full window must admit about the whole count (the simulator admits
// all 96; asking for every hit, one question per round trip per node,
// admitted 83) and none above it.
func TestSmallCountFarApart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an 8-node fleet for ~12 s")
	}
	t.Parallel()
	seed := seedFor(t)
	const (
		n     = 8
		count = 12 * n
		w     = time.Second
		sync  = 200 * time.Millisecond
		rate  = 20.0 // per node
		delay = 50 * time.Millisecond
	)
	f := startFleet(t, Options{Nodes: n, Rules: []window.Rule{{Name: "api", Count: count, Window: w, Type: window.Fixed, SyncInterval: sync}}, Seed: seed})
	for _, a := range f.Names() {
		for _, b := range f.Names() {
			if a != b {
				f.Net.Delay(a, b, delay)
			}
		}
	}
	f.Mark("50 ms delay on every link")
	from := f.Net.AlignNext(w, 50*time.Millisecond)
	hold(time.Duration(from - f.Net.Now()))
	// A check may wait a round trip for its owner's answer: enough callers
	// per node that waiting does not thin the demand.
	load := f.Drive(Traffic{Rate: rate, Workers: 8, Pick: func(*rand.Rand) (string, string) { return "api", "user:1" }, Seed: seed})
	hold(10 * w)
	recs := load.Stop()
	if bad := errorsOf(recs); len(bad) > 0 {
		t.Fatalf("%d checks failed; first: %s: %v", len(bad), bad[0].Node, bad[0].Err)
	}
	tally := Count(recs, "api", w, DecidedAt, nil)
	first := window.Index(from, w)
	var full []int64
	var line strings.Builder
	for _, idx := range tally.Windows() {
		got := tally.Sum(idx)
		fmt.Fprintf(&line, " %d", got)
		if got > count {
			t.Errorf("window %d: the fleet admitted %d, over the count of %d", idx-first, got, count)
		}
		// The first window after the delay came, while grants adjust to
		// it, and the last, cut short, say nothing of the steady state.
		if idx > first && idx < first+9 {
			full = append(full, got)
		}
	}
	t.Logf("api per window:%s", line.String())
	slices.Sort(full)
	if len(full) == 0 {
		t.Fatal("no full window measured")
	}
	if median := full[len(full)/2]; median < count*92/100 {
		t.Errorf("median full window admitted %d of %d (%+.0f%%), want at least 92%%", median, count, pct(median, count))
	}
}
