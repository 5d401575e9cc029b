package counter

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// benchRule is a lone node's batched sliding rule whose count no
// benchmark spends: every check is admitted.
var benchRule = window.Rule{Name: "api", Count: 1 << 40, Window: time.Minute, Type: window.Sliding,
	SyncInterval: 200 * time.Millisecond}

// BenchmarkAllow is the check a node makes most, on the counters alone: a
// key the table holds, through Replica.Decide as Node.Allow calls it, with
// time moving on by a microsecond a check.
func BenchmarkAllow(b *testing.B) {
	r := newTestReplica(b, "a", benchRule)
	now := t0
	if _, _, err := r.Decide(now, "api", "user:42", 1, 0, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		now += int64(time.Microsecond)
		r.Decide(now, "api", "user:42", 1, 0, nil)
	}
}

// BenchmarkAllowManyKeys is BenchmarkAllow over 100,000 keys the table
// holds, in turn: each check finds its key's slot out of the cache.
func BenchmarkAllowManyKeys(b *testing.B) {
	r := newTestReplica(b, "a", benchRule)
	keys := make([]string, 100_000)
	now := t0
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
		if _, _, err := r.Decide(now, "api", keys[i], 1, 0, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now += int64(time.Microsecond)
		r.Decide(now, "api", keys[i], 1, 0, nil)
		if i++; i == len(keys) {
			i = 0
		}
	}
}

// BenchmarkAllowNewKeys checks a key the table has never held each time,
// in one window: the cost of making a slot, and once the table is full,
// of evicting one.
func BenchmarkAllowNewKeys(b *testing.B) {
	r := newTestReplica(b, "a", benchRule)
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(keys) {
			// A fresh table, so that every check makes a slot.
			b.StopTimer()
			r = newTestReplica(b, "a", benchRule)
			i = 0
			b.StartTimer()
		}
		r.Decide(now, "api", keys[i], 1, 0, nil)
		i++
	}
}
