package faults

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// TestStrictModel checks the model on small hand-made histories, so that
// a verdict on a real one means something.
func TestStrictModel(t *testing.T) {
	const ms = int64(time.Millisecond)
	fixed := window.Rule{Name: "f", Count: 2, Window: time.Second, Type: window.Fixed, SyncInterval: window.Strict}
	sliding := window.Rule{Name: "s", Count: 2, Window: time.Second, Type: window.Sliding, SyncInterval: window.Strict}
	fixed5 := window.Rule{Name: "f5", Count: 5, Window: time.Second, Type: window.Fixed, SyncInterval: window.Strict}
	rules := []window.Rule{fixed, sliding, fixed5}
	base := 1_000 * int64(time.Second) // a window boundary
	// check is the log's correct answer to hits at at, given counts c.
	check := func(r window.Rule, c window.Counts, at, hits, call, ret int64) Record {
		d := r.Decide(c, base+at*ms, hits)
		d.Path = window.PathStrict
		return Record{Rule: r.Name, Key: "k", Hits: hits, D: d, Call: base + call*ms, Ret: base + ret*ms}
	}
	unknown := func(r window.Rule, call int64) Record {
		return Record{Rule: r.Name, Key: "k", Hits: 1, Call: base + call*ms, Ret: base + (call+1)*ms, Err: cluster.ErrOutcomeUnknown}
	}
	failClosed := func(r window.Rule, call int64) Record {
		return Record{Rule: r.Name, Key: "k", Hits: 1, Call: base + call*ms, Ret: base + (call+1)*ms,
			D: window.Decision{Path: window.PathFailClosed, At: base + call*ms}}
	}
	local := func(r window.Rule, call int64) Record {
		return Record{Rule: r.Name, Key: "k", Hits: 1, Call: base + call*ms, Ret: base + (call+1)*ms,
			D: window.Decision{Allowed: true, Path: window.PathFailLocal, At: base + call*ms}}
	}
	tests := []struct {
		name string
		recs []Record
		want porcupine.CheckResult
	}{
		{"sequential", []Record{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			check(fixed, window.Counts{Curr: 1}, 20, 1, 16, 25),
			check(fixed, window.Counts{Curr: 2}, 30, 1, 26, 35),
		}, porcupine.Ok},
		{"over-admission", []Record{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			check(fixed, window.Counts{Curr: 1}, 20, 1, 16, 25),
			check(fixed, window.Counts{Curr: 1}, 30, 1, 26, 35),
		}, porcupine.Illegal},
		{"decision time runs back", []Record{
			check(fixed, window.Counts{}, 20, 1, 5, 25),
			check(fixed, window.Counts{Curr: 1}, 10, 1, 26, 35),
		}, porcupine.Illegal},
		{"sliding decay", []Record{
			check(sliding, window.Counts{}, 900, 2, 890, 905),
			check(sliding, window.Counts{Prev: 2}, 1400, 1, 1300, 1450),
			check(sliding, window.Counts{Prev: 2}, 1600, 1, 1500, 1650),
		}, porcupine.Ok},
		{"an unknown outcome that was applied", []Record{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			unknown(fixed, 16),
			check(fixed, window.Counts{Curr: 2}, 30, 0, 26, 35),
		}, porcupine.Ok},
		{"an unknown outcome that was not", []Record{
			check(fixed, window.Counts{}, 10, 1, 5, 15),
			unknown(fixed, 16),
			check(fixed, window.Counts{Curr: 1}, 30, 0, 26, 35),
		}, porcupine.Ok},
		{"a fail-closed refusal the log counted", []Record{
			failClosed(fixed, 5),
			check(fixed, window.Counts{Curr: 1}, 30, 0, 26, 35),
		}, porcupine.Ok},
		{"one unknown cannot explain two", []Record{
			unknown(fixed, 5),
			check(fixed, window.Counts{Curr: 2}, 30, 0, 26, 35),
		}, porcupine.Illegal},
		{"a fail-local admission merged past the count", []Record{
			check(sliding, window.Counts{}, 10, 2, 5, 15),
			local(sliding, 20),
			check(sliding, window.Counts{Prev: 3}, 1500, 0, 1490, 1510),
		}, porcupine.Ok},
		{"a fail-local admission merged past the count, wrongly denied", []Record{
			check(sliding, window.Counts{}, 10, 2, 5, 15),
			check(sliding, window.Counts{Prev: 3}, 1500, 0, 1490, 1510),
		}, porcupine.Illegal},
		{"a fail-local admission merged as the previous window", []Record{
			local(sliding, 20),
			check(sliding, window.Counts{Prev: 1}, 1040, 0, 1036, 1045),
		}, porcupine.Ok},
		{"a fail-local admission merged into a window before its own", []Record{
			local(fixed5, 1020),
			check(fixed5, window.Counts{Curr: 1}, 1010, 0, 1005, 1015),
		}, porcupine.Illegal},
		{"a fail-local admission merged", []Record{
			check(fixed5, window.Counts{}, 10, 1, 5, 15),
			local(fixed5, 20),
			check(fixed5, window.Counts{Curr: 2}, 40, 0, 36, 45),
		}, porcupine.Ok},
		{"a fail-local admission merged and decided by the log", []Record{
			check(fixed5, window.Counts{}, 10, 1, 5, 15),
			local(fixed5, 20),
			check(fixed5, window.Counts{Curr: 3}, 40, 0, 36, 45),
		}, porcupine.Ok},
		{"a fail-local admission decided by the log early and merged late", []Record{
			local(fixed5, 20),
			check(fixed5, window.Counts{Curr: 1}, 30, 1, 26, 35),
			check(fixed5, window.Counts{Curr: 3}, 60, 0, 56, 65),
		}, porcupine.Ok},
		{"a fail-local admission cannot count three times", []Record{
			check(fixed5, window.Counts{}, 10, 1, 5, 15),
			local(fixed5, 20),
			check(fixed5, window.Counts{Curr: 4}, 40, 0, 36, 45),
		}, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := CheckLinearizable(rules, tt.recs, base+10*int64(time.Second), 10*time.Second)
			if v.Result != tt.want {
				t.Errorf("porcupine says %s, want %s", v.Result, tt.want)
			}
		})
	}
}
