package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestSkewWatchIgnoresDelayedDeltas feeds deltas that arrive late, as from
// a stalled stream or across a clock step: the estimate keeps the least
// delayed sample, and no correction follows.
func TestSkewWatchIgnoresDelayedDeltas(t *testing.T) {
	s := int64(time.Second)
	w := newSkewWatch([]window.Rule{{Name: "r", Count: 1, Window: time.Second, Type: window.Fixed, SyncInterval: 100 * time.Millisecond}})
	now := 1_000 * s
	for _, peer := range []string{"a", "b"} {
		w.observe(peer, now-int64(time.Millisecond), now)
	}
	// Both peers' next deltas were held up 3 s on the way.
	for _, peer := range []string{"a", "b"} {
		if r := w.observe(peer, now, now+3*s); r.fix != 0 || r.skewedPeers != 0 {
			t.Fatalf("after a delayed delta from %s: correction %v, %d skewed peers; want none", peer, time.Duration(r.fix), r.skewedPeers)
		}
	}
}

// TestSkewWatchRidesOutAStall feeds both peers' deltas held up 700 ms for
// 3 s on end, as a stream stalled on lost segments or a node starved of CPU
// reads them, after a second of prompt ones: more delayed samples than the
// watch once kept, every one beyond the tolerance. The prompt ones are
// still in the horizon: no correction, no peer named skewed.
func TestSkewWatchRidesOutAStall(t *testing.T) {
	ms := int64(time.Millisecond)
	w := newSkewWatch([]window.Rule{{Name: "r", Count: 1, Window: time.Second, Type: window.Sliding, SyncInterval: 100 * time.Millisecond}})
	now := int64(1_000 * time.Second)
	for step := range 40 {
		delay := ms
		if step >= 10 {
			delay = 700 * ms
		}
		for _, peer := range []string{"a", "b"} {
			if r := w.observe(peer, now-delay, now); r.fix != 0 || r.skewedPeers != 0 {
				t.Fatalf("%v into the stall, from %s: correction %v, %d skewed peers; want none",
					time.Duration(now-1_000*int64(time.Second)-1_000*ms), peer, time.Duration(r.fix), r.skewedPeers)
			}
		}
		now += 100 * ms
	}
}

// TestSkewWatchRidesOutAPartition cuts both peers off for 10 s, longer
// than the horizon, after 5 s of prompt deltas. At the heal the deltas
// queued during the cut arrive at once, each late by up to 10 s: one
// moment's worth of samples, which must not move this node's clock; nor
// must the prompt ones that follow.
func TestSkewWatchRidesOutAPartition(t *testing.T) {
	ms := int64(time.Millisecond)
	w := newSkewWatch([]window.Rule{{Name: "r", Count: 1, Window: time.Second, Type: window.Sliding, SyncInterval: 100 * time.Millisecond}})
	start := int64(1_000 * time.Second)
	check := func(what string, r skewReport) {
		t.Helper()
		if r.fix != 0 || r.skewedPeers != 0 {
			t.Fatalf("%s: correction %v, %d skewed peers; want none", what, time.Duration(r.fix), r.skewedPeers)
		}
	}
	now := start
	for ; now < start+5*int64(time.Second); now += 100 * ms {
		for _, peer := range []string{"a", "b"} {
			check("before the cut", w.observe(peer, now-ms, now))
		}
	}
	cut, heal := now, now+10*int64(time.Second)
	for sent := cut; sent < heal; sent += 100 * ms {
		for _, peer := range []string{"a", "b"} {
			check("the queued deltas at the heal", w.observe(peer, sent, heal+(sent-cut)/1000))
		}
	}
	for now = heal + 10*ms; now < heal+12*int64(time.Second); now += 100 * ms {
		for _, peer := range []string{"a", "b"} {
			check("after the heal", w.observe(peer, now-ms, now))
		}
	}
}

// TestSkewWatchFindsAStep steps this node's clock 2 s ahead after its
// peers' deltas have come promptly for a while: the correction follows once
// the samples from before the step leave the horizon (which the step itself
// brings closer: the horizon runs on this node's clock).
func TestSkewWatchFindsAStep(t *testing.T) {
	s, ms := int64(time.Second), int64(time.Millisecond)
	w := newSkewWatch([]window.Rule{{Name: "r", Count: 1, Window: time.Second, Type: window.Fixed, SyncInterval: 100 * time.Millisecond}})
	truth := 1_000 * s // the peers' clocks, and this node's until the step
	for range 50 {
		for _, peer := range []string{"a", "b"} {
			w.observe(peer, truth-ms, truth)
		}
		truth += 100 * ms
	}
	stepAt := truth
	found := int64(0)
	for truth < stepAt+2*int64(offsetHorizon) && found == 0 {
		for _, peer := range []string{"a", "b"} {
			if r := w.observe(peer, truth-ms, truth+2*s); r.fix != 0 && found == 0 {
				found = truth
				if r.fix > -2*s+10*ms || r.fix < -2*s-10*ms {
					t.Errorf("correction %v, want about −2 s", time.Duration(r.fix))
				}
			}
		}
		truth += 100 * ms
	}
	switch {
	case found == 0:
		t.Fatalf("no correction within %v of the step", 2*offsetHorizon)
	case found-stepAt > int64(offsetHorizon+offsetBucket):
		t.Errorf("corrected %v after the step, want within the horizon, %v", time.Duration(found-stepAt), offsetHorizon)
	}
}

func TestSkewWatch(t *testing.T) {
	s := int64(time.Second)
	ms := int64(time.Millisecond)
	rules := []window.Rule{{Name: "r", Count: 1, Window: time.Second, Type: window.Fixed, SyncInterval: 100 * time.Millisecond}}
	tests := []struct {
		name        string
		offsets     map[string]int64 // peer → its clock minus this node's
		wantFix     int64
		wantSkewed  int
		wantTolered int64
	}{
		{"agreeing fleet, latency only", map[string]int64{"a": -2 * ms, "b": -3 * ms}, 0, 0, s / 2},
		{"this node ahead by 2 s", map[string]int64{"a": -2 * s, "b": -2*s - 5*ms}, -2 * s, 0, s / 2},
		{"this node behind by 3 s", map[string]int64{"a": 3 * s, "b": 3 * s, "c": 3*s + ms}, 3 * s, 0, s / 2},
		{"one peer ahead by 2 s", map[string]int64{"a": 2 * s, "b": 0, "c": -ms}, 0, 1, s / 2},
		{"a lone peer cannot tell which clock is off", map[string]int64{"a": 2 * s}, 0, 1, s / 2},
		{"within the tolerance", map[string]int64{"a": 400 * ms, "b": 400 * ms}, 0, 0, s / 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newSkewWatch(rules)
			var r skewReport
			// A delta from each peer every second, over enough of the
			// horizon for an estimate, and one more pass so that every
			// peer is judged against the final correction.
			for at := range int64(offsetSpread + 1) {
				for peer, off := range tc.offsets {
					r = w.observe(peer, (1_000+at)*s+off, (1_000+at)*s)
				}
			}
			if got := w.fix.Load(); got != tc.wantFix {
				t.Errorf("correction %v, want %v", time.Duration(got), time.Duration(tc.wantFix))
			}
			if r.skewedPeers != tc.wantSkewed {
				t.Errorf("%d skewed peers, want %d", r.skewedPeers, tc.wantSkewed)
			}
			if got := w.tolerance.Load(); got != tc.wantTolered {
				t.Errorf("tolerance %v, want %v", time.Duration(got), time.Duration(tc.wantTolered))
			}
		})
	}
}

// TestSkewedNodeDecidesOnTheFleetsClock starts three nodes, one with its
// clock 2.5 windows ahead. Without a correction it would count in windows
// the others have not opened, and each side would hand out the whole count.
// It must find its clock off, decide on the fleet's clock, and count in the
// same windows as the others.
func TestSkewedNodeDecidesOnTheFleetsClock(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	// The whole test runs in one window of the fleet's clock, however slow
	// the machine: an hour.
	rule := window.Rule{Name: "api", Count: 30, Window: time.Hour, Type: window.Fixed, SyncInterval: 50 * time.Millisecond}
	base := alignedClock(rule.Window)
	skew := 5 * rule.Window / 2
	var nodes []*Node
	for i := range 3 {
		now := base
		if i == 2 {
			now = func() int64 { return base() + int64(skew) }
		}
		var join []string
		if len(nodes) > 0 {
			join = []string{nodes[0].GossipAddr()}
		}
		nd, err := Start(context.Background(), Config{Name: fmt.Sprintf("node-%d", i), Rules: []window.Rule{rule},
			GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", Join: join, JoinTimeout: 5 * time.Second,
			ShutdownTimeout: time.Second, Logger: testLogger(t), Now: clockOf(now)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		nodes = append(nodes, nd)
	}
	skewed := nodes[2]
	// Quiet nodes send no deltas: a little traffic on every node carries
	// the clocks around.
	waitFor(t, patience, "the skewed node to correct its clock and the others to name it", func() bool {
		for _, nd := range nodes {
			if _, err := nd.Allow(context.Background(), rule.Name, "warm-"+nd.Name(), 1); err != nil {
				t.Fatal(err)
			}
		}
		c := skewed.Metrics().ClockCorrection
		return c < -int64(skew)+int64(time.Second) && c > -int64(skew)-int64(time.Second) &&
			nodes[0].Metrics().SkewedPeers == 1 && nodes[1].Metrics().SkewedPeers == 1
	})
	// node-0 spends half the count; the skewed node, asking for all of it,
	// must find exactly the other half: more, and its clock inflated the
	// count; fewer, and it counts in another window than node-0.
	admitted := admitOn(t, nodes[0], rule.Name, "k", 15)
	admitted += admitOn(t, skewed, rule.Name, "k", 30)
	if admitted != int(rule.Count) {
		t.Errorf("the fleet admitted %d of a count of %d, node-0 15 of them: the skewed node counts in another window", admitted, rule.Count)
	}
	waitFor(t, patience, "both nodes to see every admission", func() bool {
		for _, nd := range []*Node{nodes[0], skewed} {
			if _, v, _ := nd.View(rule.Name, "k"); v.Curr != int64(admitted) {
				return false
			}
		}
		return true
	})
}

// admitOn checks key n times on nd and returns how many were admitted.
func admitOn(t *testing.T, nd *Node, rule, key string, n int) int {
	t.Helper()
	got := 0
	for range n {
		d, err := nd.Allow(context.Background(), rule, key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	return got
}
