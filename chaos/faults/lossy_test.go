package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestLossyLinks runs a batched fleet with 20 % packet loss and 50 ms
// one-way delay on every link, after it formed, and checks every window
// against the policy's bound widened by the delay:
//
//	fleet per window ≤ count + 10 % + (N − 1) × r × (d + E[retransmission])
//
// where r is each node's rate on the rule and E[retransmission] ≈ 100 ms is
// what 20 % loss costs a stream segment on average (p × RTO, RTO = 200 ms +
// the 100 ms round trip, doubling). The views of the ledger rule must still
// agree with what the nodes admitted once traffic stops.
func TestLossyLinks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node fleet for ~12 s")
	}
	t.Parallel()
	seed := seedFor(t)
	const (
		n     = 3
		count = 100
		w     = time.Second
		sync  = 100 * time.Millisecond
		rate  = 300.0
		loss  = 0.2
		delay = 50 * time.Millisecond
		retx  = 100 * time.Millisecond
	)
	apiRate := rate / 2
	slack := int64(count/10 + (n-1)*apiRate*(delay+retx).Seconds())
	f := startFleet(t, Options{Nodes: n, Rules: batchedRules(count, w, sync, window.Sliding), Seed: seed})
	for _, a := range f.Names() {
		for _, b := range f.Names() {
			if a != b {
				f.Net.Drop(a, b, loss)
				f.Net.Delay(a, b, delay)
			}
		}
	}
	f.Mark("20% loss, 50 ms delay on every link")
	lossyFrom := f.Net.AlignNext(w, 50*time.Millisecond)
	hold(time.Duration(lossyFrom - f.Net.Now()))
	load := f.Drive(Traffic{Rate: rate, Workers: 2, Pick: pickBatched, Seed: seed})
	hold(10 * w)
	recs := load.Stop()
	stopAt := f.Net.Now()
	if bad := errorsOf(recs); len(bad) > 0 {
		t.Fatalf("%d checks failed; first: %s: %v", len(bad), bad[0].Node, bad[0].Err)
	}

	tally := Count(recs, "api", w, DecidedAt, nil)
	first := window.Index(lossyFrom, w)
	var worst, sum int64
	windows := 0
	var line strings.Builder
	idxs := tally.Windows()
	for i, idx := range idxs {
		n := tally.Sum(idx)
		fmt.Fprintf(&line, " %d", n)
		worst = max(worst, n)
		if i < len(idxs)-1 { // the last window is cut short
			sum += n
			windows++
		}
		if n > count+slack {
			t.Errorf("window %d: the fleet admitted %d, bound %d (count %d + slack %d)", idx-first, n, count+slack, count, slack)
		}
	}
	t.Logf("api per window:%s", line.String())
	st := f.Net.Stats()
	t.Logf("api, count %d per %v over %d full windows: worst window %d (%+.0f%%), mean %.1f; bound %d",
		count, w, windows, worst, pct(worst, count), float64(sum)/float64(windows), count+slack)
	t.Logf("switchboard: %d of %d gossip packets dropped, %d segments retransmitted",
		st.PacketsDropped.Load(), st.PacketsSent.Load(), st.Retransmits.Load())

	want := admittedPerKey(recs, "ledger")
	var diff string
	if !waitUntilOr(30*time.Second, func() bool { diff = viewsWithin(f, "ledger", want, nil); return diff == "" }) {
		t.Fatalf("views did not agree within 30 s of the traffic's end, links still lossy: %s", diff)
	}
	t.Logf("with traffic stopped and links still lossy, views agreed in %s", secs(time.Duration(f.Net.Now()-stopAt)))
}
