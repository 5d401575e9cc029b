package counter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

const sec = int64(time.Second)

// t0 is an epoch-aligned moment for every window length the tests use.
const t0 = 1_800_000_000 * sec

func newTestReplica(t testing.TB, node string, rules ...window.Rule) *Replica {
	t.Helper()
	r, err := NewReplica(Config{Self: Incarnation{Node: node, Boot: 1}, Rules: rules, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func rule(count int64, w time.Duration, typ window.Type) window.Rule {
	return window.Rule{Name: "api", Count: count, Window: w, Type: typ, SyncInterval: w / 5}
}

func TestAllowErrors(t *testing.T) {
	r := newTestReplica(t, "a", rule(10, time.Second, window.Fixed))
	tests := []struct {
		name string
		rule string
		key  string
		hits int64
		want error
	}{
		{"unknown rule", "nope", "k", 1, ErrUnknownRule},
		{"empty key", "api", "", 1, ErrEmptyKey},
		{"long key", "api", strings.Repeat("k", MaxKeyLen+1), 1, ErrKeyTooLong},
		{"key not UTF-8", "api", "user:\xff", 1, ErrKeyNotUTF8},
		{"key cut inside a rune", "api", "é"[:1], 1, ErrKeyNotUTF8},
		{"key with a surrogate", "api", "\xed\xa0\x80", 1, ErrKeyNotUTF8},
		{"rule not UTF-8", "api\xff", "k", 1, ErrRuleNotUTF8},
		{"rule too long", strings.Repeat("r", MaxRuleLen+1), "k", 1, ErrRuleTooLong},
		{"rule too long is unknown", strings.Repeat("r", MaxRuleLen+1), "k", 1, ErrUnknownRule},
		{"negative hits", "api", "k", -1, ErrNegativeHits},
		{"hits over count", "api", "k", 11, ErrHitsOverCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Allow(t0, tt.rule, tt.key, tt.hits)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Allow() error = %v, want %v", err, tt.want)
			}
			if check := r.Check(tt.rule, tt.key, tt.hits); check == nil || check.Error() != err.Error() {
				t.Fatalf("Check() = %v, Allow() %v", check, err)
			}
			// The paths a node's batched checks take, which leave the
			// key's UTF-8 to the table (Table.check).
			if _, _, decide := r.Decide(t0, tt.rule, tt.key, tt.hits, 0, nil); decide == nil || decide.Error() != err.Error() {
				t.Fatalf("Decide() = %v, Allow() %v", decide, err)
			}
			if _, _, reserve := r.Reserve(t0, tt.rule, tt.key, tt.hits); reserve == nil || reserve.Error() != err.Error() {
				t.Fatalf("Reserve() = %v, Allow() %v", reserve, err)
			}
		})
	}
	if own, view := r.Table("api").Counts("user:\xff", t0); own != (window.Counts{}) || view != (window.Counts{}) {
		t.Errorf("a key that is not UTF-8 was counted: own %+v, view %+v", own, view)
	}
	for _, tt := range []struct{ rule, key, text string }{
		{"api", "user:\xff", "key must be valid UTF-8, got byte 0xFF at offset 5"},
		{"api\xff", "k", `unknown rule "api\xff": rule must be valid UTF-8`},
	} {
		if _, err := r.Allow(t0, tt.rule, tt.key, 1); err == nil || err.Error() != tt.text {
			t.Errorf("Allow(%q, %q) = %v, want %q", tt.rule, tt.key, err, tt.text)
		}
	}
	if _, err := r.Allow(t0, "api\xff", "k", 1); !errors.Is(err, ErrUnknownRule) {
		t.Errorf("a rule name that is not UTF-8 is unknown too: %v", err)
	}
	if _, err := r.Allow(t0, "api", strings.Repeat("k", MaxKeyLen), 10); err != nil {
		t.Fatalf("a key of exactly %d bytes and hits = count: %v", MaxKeyLen, err)
	}
}

func TestNewReplicaRejectsBadRules(t *testing.T) {
	good := rule(10, time.Second, window.Fixed)
	bad := good
	bad.Count = 0
	if _, err := NewReplica(Config{Self: Incarnation{Node: "a"}, Rules: []window.Rule{good, bad}}); err == nil ||
		!strings.Contains(err.Error(), "count must be ≥ 1") {
		t.Fatalf("NewReplica with count 0: %v", err)
	}
	if _, err := NewReplica(Config{Self: Incarnation{Node: "a"}, Rules: []window.Rule{good, good}}); err == nil ||
		!strings.Contains(err.Error(), "used twice") {
		t.Fatalf("NewReplica with a duplicate rule: %v", err)
	}
}

// A lone replica decides exactly as the window math does.
func TestAloneIsExact(t *testing.T) {
	for _, typ := range []window.Type{window.Fixed, window.Sliding} {
		for _, alloc := range []window.Allocation{window.Adaptive, window.Classic} {
			t.Run(typ.String()+"/"+alloc.String(), func(t *testing.T) {
				ru := rule(50, time.Second, typ)
				ru.Allocation = alloc
				r := newTestReplica(t, "a", ru)
				var c window.Counts
				idx := window.Index(t0, time.Second)
				for i := range int64(5000) {
					now := t0 + i*(sec/1000)*3/2 // 666 requests/s over 7.5 s
					if w := window.Index(now, time.Second); w != idx {
						c = window.Counts{Prev: c.Curr}
						if w > idx+1 {
							c = window.Counts{}
						}
						idx = w
					}
					want := ru.Decide(c, now, 1)
					got, err := r.Allow(now, "api", "k", 1)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("request %d: got %+v, want %+v", i, got, want)
					}
					if want.Allowed {
						c.Curr++
					}
					if i%97 == 0 {
						r.Tick(now)
					}
				}
			})
		}
	}
}

// TestSyncBetweenTwoReplicas checks full-mesh sync (adaptive allocation):
// each node sends its peer what changed, and nothing once nothing does.
func TestSyncBetweenTwoReplicas(t *testing.T) {
	ru := rule(100, 10*time.Second, window.Fixed)
	ru.SyncInterval = 200 * time.Millisecond
	ru.Allocation = window.Adaptive
	a := newTestReplica(t, "a", ru)
	b := newTestReplica(t, "b", ru)
	a.SetPeers([]Incarnation{b.Self()})
	b.SetPeers([]Incarnation{a.Self()})
	for range 30 {
		if _, err := a.Allow(t0+1, "api", "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		if _, err := b.Allow(t0+1, "api", "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	deliver := func(from *Replica, to *Replica, now int64) int {
		n := 0
		for _, o := range from.Tick(now) {
			if o.To != to.Self() {
				t.Fatalf("delta to %v, want %v", o.To, to.Self())
			}
			if _, err := to.Receive(now, o.Delta); err != nil {
				t.Fatal(err)
			}
			n += o.Delta.Size()
		}
		return n
	}
	if n := deliver(a, b, t0+int64(ru.SyncInterval)); n != 1 {
		t.Fatalf("a sent %d entries, want 1", n)
	}
	if n := deliver(b, a, t0+int64(ru.SyncInterval)); n != 1 {
		t.Fatalf("b sent %d entries, want 1", n)
	}
	for _, r := range []*Replica{a, b} {
		_, view := r.Table("api").Counts("k", t0+2)
		if view.Curr != 50 {
			t.Errorf("%s sees %d in the window, want 50", r.Self().Node, view.Curr)
		}
	}
	// Once a's claim and need settle (no traffic: need 0, claim steady),
	// rounds send nothing.
	deliver(a, b, t0+2*int64(ru.SyncInterval))
	deliver(a, b, t0+3*int64(ru.SyncInterval))
	if n := deliver(a, b, t0+4*int64(ru.SyncInterval)); n != 0 {
		t.Fatalf("a re-sent %d unchanged entries", n)
	}
	// A resend after a broken stream sends everything again.
	a.ResendAll(b.Self())
	if n := deliver(a, b, t0+5*int64(ru.SyncInterval)); n != 1 {
		t.Fatalf("after ResendAll a sent %d entries, want 1", n)
	}
}

func TestRestartKeepsEarlierAdmissions(t *testing.T) {
	ru := rule(100, time.Second, window.Sliding)
	a := newTestReplica(t, "a", ru)
	b := newTestReplica(t, "b", ru)
	a.SetPeers([]Incarnation{b.Self()})
	b.SetPeers([]Incarnation{a.Self()})
	for range 40 {
		a.Allow(t0+1, "api", "k", 1)
	}
	for _, o := range a.Tick(t0 + int64(ru.SyncInterval)) {
		b.Receive(t0+int64(ru.SyncInterval), o.Delta)
	}
	// a restarts with a new boot id and pulls b's full state.
	a2, err := NewReplica(Config{Self: Incarnation{Node: "a", Boot: 2}, Rules: []window.Rule{ru}, Start: t0 + sec/2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.ReceiveFrom(t0+sec/2, b.Snapshot(t0+sec/2), Origin{Asked: true}); err != nil {
		t.Fatal(err)
	}
	_, view := a2.Table("api").Counts("k", t0+sec/2)
	if view.Curr != 40 {
		t.Fatalf("restarted node sees %d, want the 40 its earlier run admitted", view.Curr)
	}
	admitted := 0
	for range 100 {
		if d, _ := a2.Allow(t0+sec/2, "api", "k", 1); d.Allowed {
			admitted++
		}
	}
	if admitted != 60 {
		t.Fatalf("restarted node admitted %d more, want 60", admitted)
	}
	// Two windows later the dead incarnation's entries are gone.
	_, view = a2.Table("api").Counts("k", t0+3*sec)
	if view != (window.Counts{}) {
		t.Fatalf("expired counts linger: %+v", view)
	}
}

func TestReceiveRejectsMalformed(t *testing.T) {
	r := newTestReplica(t, "a", rule(10, time.Second, window.Fixed))
	tests := []struct {
		name string
		d    Delta
		ok   bool
	}{
		{"bad incarnation index", Delta{From: Incarnation{Node: "b"}, Incarnations: []Incarnation{{Node: "b"}},
			Rules: []RuleDelta{{Rule: "api", Entries: []Entry{{Key: "k", Window: window.Index(t0, time.Second), Inc: 3, Admitted: 1}}}}}, false},
		{"nameless incarnation", Delta{From: Incarnation{Node: "b"}, Incarnations: []Incarnation{{}}}, false},
		{"negative counts dropped", Delta{From: Incarnation{Node: "b"}, Incarnations: []Incarnation{{Node: "b"}},
			Rules: []RuleDelta{{Rule: "api", Entries: []Entry{{Key: "k", Window: window.Index(t0, time.Second), Admitted: -5}}}}}, true},
		{"unknown rule skipped", Delta{From: Incarnation{Node: "b"}, Incarnations: []Incarnation{{Node: "b"}},
			Rules: []RuleDelta{{Rule: "other", Entries: []Entry{{Key: "k"}}}}}, true},
		// A node of an earlier version admitted such keys; counted here,
		// one would keep this node from saving its counts.
		{"key not UTF-8 dropped", Delta{From: Incarnation{Node: "b"}, Incarnations: []Incarnation{{Node: "b"}},
			Rules: []RuleDelta{{Rule: "api", Entries: []Entry{{Key: "k\xff", Window: window.Index(t0, time.Second), Admitted: 3}}}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Receive(t0, &tt.d)
			if (err == nil) != tt.ok {
				t.Fatalf("Receive() error = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	for _, key := range []string{"k", "k\xff"} {
		if _, view := r.Table("api").Counts(key, t0); view != (window.Counts{}) {
			t.Fatalf("malformed deltas changed the view of %q: %+v", key, view)
		}
	}
}

// TestClockSteppedBack checks that a clock that jumps back does not stall
// sync rounds until it catches up with where it was.
func TestClockSteppedBack(t *testing.T) {
	rule := window.Rule{Name: "r", Count: 10, Window: time.Second, Type: window.Fixed, SyncInterval: 100 * time.Millisecond}
	start := int64(100 * time.Second)
	r, err := NewReplica(Config{Self: Incarnation{Node: "a", Boot: 1}, Rules: []window.Rule{rule}, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	r.SetPeers([]Incarnation{{Node: "b", Boot: 2}})
	back := start - int64(30*time.Second)
	r.ClockStepped(back)
	if next := r.NextTick(); next > back+int64(rule.SyncInterval) {
		t.Errorf("after a step back of 30 s the next round is %v away, want at most one interval", time.Duration(next-back))
	}
}
