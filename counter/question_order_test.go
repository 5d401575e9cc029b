package counter

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestOwnedQuestionOvertaken checks a question to a key's owner that a
// routine report overtook on its way: a sender that builds its sync round
// while a check builds its question numbers the report after the question
// and may send it first. The owner takes a delta numbered before one it
// has for stale and drops what it holds, the question too, so the check
// was refused, told to come back a sync interval later, with the fleet's
// room unspent. Renumbered when it is sent, the question is the newer
// delta and is answered.
func TestOwnedQuestionOvertaken(t *testing.T) {
	for _, tc := range []struct {
		name     string
		renumber bool
		admitted bool
	}{{"as numbered", false, false}, {"renumbered at sending", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOwnedFleet(t, 3, ownedRule(5, time.Minute, window.Fixed))
			own := f.ownerIndex("carol")
			asker := (own + 1) % 3
			rp := f.nodes[asker]
			now := t0
			var ask *Outbound
			for i := 0; ask == nil; i++ {
				if i == 5 {
					t.Fatalf("node %d never had to ask the owner in 5 checks", asker)
				}
				d, q, err := rp.Decide(now, "api", "carol", 1, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				if q == nil {
					if !d.Allowed {
						t.Fatalf("check %d refused without asking: %+v", i+1, d)
					}
					now += sec
				}
				ask = q
			}
			// The round is built after the question, and reaches the owner
			// first.
			var report *Outbound
			for _, o := range rp.Tick(now) {
				if o.To == f.nodes[own].Self() && o.Delta.Kind == KindReport {
					report = &o
				}
			}
			if report == nil {
				t.Fatal("the sync round sent the owner no report")
			}
			if report.Delta.Seq <= ask.Delta.Seq {
				t.Fatalf("report numbered %d, question %d: want the report after", report.Delta.Seq, ask.Delta.Seq)
			}
			f.deliver(now, []Outbound{*report})
			if tc.renumber {
				if seq := rp.Renumber(ask, now); seq <= report.Delta.Seq {
					t.Fatalf("renumbered %d, not after the report's %d", seq, report.Delta.Seq)
				}
			}
			f.deliver(now, []Outbound{*ask})
			d, err := rp.Settle(now, "api", "carol", 1, Answered, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tc.admitted {
				t.Fatalf("check after the answer: %+v, want allowed=%v", d, tc.admitted)
			}
			if !tc.admitted && d.RetryAfter < ownedRule(5, time.Minute, window.Fixed).SyncInterval {
				t.Fatalf("refusal's retry after %v", d.RetryAfter)
			}
		})
	}
}
