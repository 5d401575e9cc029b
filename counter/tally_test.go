package counter

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestTally checks which decisions a table tallies: those Decide and
// Settle make for checks without a ticket, by outcome; not Allow's,
// Reserve's or those of checks with a ticket, which their callers count.
func TestTally(t *testing.T) {
	rule := window.Rule{Name: "api", Count: 2, Window: time.Minute, Type: window.Fixed, SyncInterval: 200 * time.Millisecond}
	shadow := rule
	shadow.Shadow = true
	for _, tc := range []struct {
		name  string
		rule  window.Rule
		check func(rp *Replica, at int64) error
		want  Tally
	}{
		{"Decide, no ticket: 2 admitted, 1 refused", rule, func(rp *Replica, at int64) error {
			for range 3 {
				if _, _, err := rp.Decide(at, "api", "k", 1, 0, nil); err != nil {
					return err
				}
			}
			return nil
		}, Tally{Admitted: 2, Refused: 1}},
		{"a rule in shadow mode: its refusals apart", shadow, func(rp *Replica, at int64) error {
			for range 3 {
				if _, _, err := rp.Decide(at, "api", "k", 1, 0, nil); err != nil {
					return err
				}
			}
			return nil
		}, Tally{Admitted: 2, ShadowRefused: 1}},
		{"Settle, no ticket", rule, func(rp *Replica, at int64) error {
			_, err := rp.Settle(at, "api", "k", 1, Answered, nil)
			return err
		}, Tally{Admitted: 1}},
		{"Decide with a ticket: not tallied", rule, func(rp *Replica, at int64) error {
			var tk Ticket
			_, _, err := rp.Decide(at, "api", "k", 1, 0, &tk)
			return err
		}, Tally{}},
		{"Allow and Reserve: not tallied", rule, func(rp *Replica, at int64) error {
			if _, err := rp.Allow(at, "api", "k", 1); err != nil {
				return err
			}
			_, _, err := rp.Reserve(at, "api", "k", 1)
			return err
		}, Tally{}},
		{"an error: nothing decided, nothing tallied", rule, func(rp *Replica, at int64) error {
			if _, _, err := rp.Decide(at, "api", "", 1, 0, nil); err == nil {
				t.Error("Decide with an empty key: no error")
			}
			return nil
		}, Tally{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := newTestReplica(t, "a", tc.rule)
			if err := tc.check(rp, t0); err != nil {
				t.Fatal(err)
			}
			if got := rp.Table("api").Tally(); got != tc.want {
				t.Errorf("Tally() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTallyAcrossSetRules checks that a rule's tally goes on across a
// reload, whether its table is kept, succeeded (same window) or replaced
// (another window), and starts afresh for a rule removed and added back.
func TestTallyAcrossSetRules(t *testing.T) {
	rule := window.Rule{Name: "api", Count: 100, Window: time.Minute, Type: window.Fixed, SyncInterval: 200 * time.Millisecond}
	count := rule
	count.Count = 50
	win := rule
	win.Window = 2 * time.Minute
	other := window.Rule{Name: "other", Count: 1, Window: time.Minute}
	for _, tc := range []struct {
		name    string
		reloads [][]window.Rule
		want    uint64
	}{
		{"same rule", [][]window.Rule{{rule}}, 6},
		{"count changed: a successor table", [][]window.Rule{{count}}, 6},
		{"window changed: a new table", [][]window.Rule{{win}}, 6},
		{"twice changed", [][]window.Rule{{win}, {rule}}, 9},
		{"removed and added back", [][]window.Rule{{other}, {rule}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := newTestReplica(t, "a", rule)
			decide := func() {
				for range 3 {
					if _, _, err := rp.Decide(t0, "api", "k", 1, 0, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			decide()
			for _, rules := range tc.reloads {
				if err := rp.SetRules(rules, t0); err != nil {
					t.Fatal(err)
				}
				if rp.Table("api") != nil {
					decide()
				}
			}
			if got := rp.Table("api").Tally().Admitted; got != tc.want {
				t.Errorf("admitted = %d, want %d", got, tc.want)
			}
		})
	}
}
