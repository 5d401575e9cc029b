package counter

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestPooledLineStopsAtTheLastInterval checks the owner's grants in a
// saturated sliding window: a node that says it asks faster than its checks
// arrive gets a line that stops where the window's last sync interval
// starts, and none that grows once that interval has begun; a node that
// does not say so keeps a line to the window's end.
func TestPooledLineStopsAtTheLastInterval(t *testing.T) {
	r := ownedRule(1000, time.Second, window.Sliding)
	owner := newTestReplica(t, "a", r)
	incs := []Incarnation{owner.Self(), {Node: "b", Boot: 1}, {Node: "c", Boot: 1}}
	owner.SetPeers(incs)
	key := ""
	tab := owner.Table("api")
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("k%d", i); tab.fleet.Load().ownerOf(k) == tab.self {
			key = k
		}
	}
	w := int64(r.Window)
	idx := window.Index(t0, r.Window) + 1
	start := idx * w
	end := start + w
	seq := map[string]uint64{}
	report := func(from int, now int64, e Entry) Entry {
		t.Helper()
		inc := incs[from]
		seq[inc.Node]++
		e.Key = key
		d := &Delta{From: inc, Seq: seq[inc.Node], Kind: KindReport, Incarnations: []Incarnation{inc}, Live: 3,
			Rules: []RuleDelta{{Rule: "api", Entries: []Entry{e}}}}
		res, err := owner.Receive(now, d)
		if err != nil {
			t.Fatalf("report from %s: %v", inc.Node, err)
		}
		if res.Reply == nil || len(res.Reply.Delta.Rules) != 1 || len(res.Reply.Delta.Rules[0].Entries) != 1 {
			t.Fatalf("report from %s at %v drew no answer: %+v", inc.Node, time.Duration(now-start), res.Reply)
		}
		return res.Reply.Delta.Rules[0].Entries[0]
	}
	// A full window before: 500 from each of b and c.
	report(1, start-int64(50*time.Millisecond), Entry{Window: idx - 1, Admitted: 500, Need: 200})
	report(2, start-int64(50*time.Millisecond), Entry{Window: idx - 1, Admitted: 500, Need: 200})

	at := start + int64(300*time.Millisecond)
	pooled := report(1, at, Entry{Window: idx, Prev: 500, Need: 200, Pooled: true})
	if pooled.Rate <= 0 {
		t.Fatalf("pooled node's grant %+v does not grow with time", pooled)
	}
	if want := end - int64(r.SyncInterval); pooled.RateUntil != want {
		t.Errorf("pooled node's line stops at %v, want %v (the last sync interval's start)",
			time.Duration(pooled.RateUntil-start), time.Duration(want-start))
	}
	held := report(2, at, Entry{Window: idx, Prev: 500, Need: 200})
	if held.Rate <= 0 || held.RateUntil != 0 {
		t.Errorf("node that does not pool got %+v, want a line to the window's end (RateUntil 0)", held)
	}
	late := report(1, end-int64(50*time.Millisecond), Entry{Window: idx, Admitted: 40, Prev: 500, Need: 200, Pooled: true,
		Grant: pooled.Grant, Rate: pooled.Rate, RateFrom: pooled.RateFrom, RateUntil: pooled.RateUntil, Told: seq["b"]})
	if late.Rate != 0 {
		t.Errorf("pooled node's grant in the last interval %+v grows with time", late)
	}
}

// TestAsksFaster checks when a node says it asks its owner faster than its
// own checks arrive: in sliding windows only, with demand, and when a round
// trip is shorter than the gap between two of its checks and than the
// time it may wait for an answer.
func TestAsksFaster(t *testing.T) {
	ms := int64(time.Millisecond)
	tests := []struct {
		name   string
		typ    window.Type
		demand int64 // per 100 ms sync interval
		rtt    int64
		want   bool
	}{
		{"near, busy", window.Sliding, 50, 1 * ms, true},
		{"round trip just under the gap", window.Sliding, 10, 9 * ms, true},
		{"round trip as long as the gap", window.Sliding, 10, 10 * ms, false},
		{"far", window.Sliding, 10, 60 * ms, false},
		{"idle", window.Sliding, 0, 1 * ms, false},
		{"beyond the ask timeout", window.Sliding, 1, 300 * ms, false},
		{"fixed window", window.Fixed, 50, 1 * ms, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rp, err := NewReplica(Config{Self: Incarnation{Node: "a", Boot: 1}, Rules: []window.Rule{ownedRule(1000, time.Second, tt.typ)},
				Start: t0, AskTimeout: 250 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if got := rp.Table("api").asksFaster(tt.demand, tt.rtt); got != tt.want {
				t.Errorf("asksFaster(%d, %v) = %v, want %v", tt.demand, time.Duration(tt.rtt), got, tt.want)
			}
		})
	}
}
