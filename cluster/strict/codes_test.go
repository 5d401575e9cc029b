package strict

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// checkSentinel reports whether err matches want and no other error a
// strict decision can carry (want nil: none).
func checkSentinel(t *testing.T, what string, err, want error) {
	t.Helper()
	for _, s := range []error{cluster.ErrUnknownRule, cluster.ErrEmptyKey, cluster.ErrKeyTooLong, cluster.ErrNegativeHits, cluster.ErrHitsOverCount} {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("%s: errors.Is(%q, %q) = %v, want %v", what, err, s, got, s == want)
		}
	}
}

// TestStrictCodeRoundTrip sends the errors a state machine decides with
// through the wire: the node that asked gets the same sentinel and text.
func TestStrictCodeRoundTrip(t *testing.T) {
	r, err := counter.NewReplica(counter.Config{Self: strictIncarnation(0),
		Rules: []window.Rule{{Name: "s", Count: 5, Window: time.Second, SyncInterval: window.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		code sluicev1.StrictErrorCode
		want error
	}{
		{"unknown rule", r.Check("nope", "k", 1), sluicev1.StrictErrorCode_STRICT_ERROR_CODE_UNKNOWN_RULE, cluster.ErrUnknownRule},
		{"empty key", r.Check("s", "", 1), sluicev1.StrictErrorCode_STRICT_ERROR_CODE_EMPTY_KEY, cluster.ErrEmptyKey},
		{"key too long", r.Check("s", strings.Repeat("k", counter.MaxKeyLen+1), 1), sluicev1.StrictErrorCode_STRICT_ERROR_CODE_KEY_TOO_LONG, cluster.ErrKeyTooLong},
		{"negative hits", r.Check("s", "k", -1), sluicev1.StrictErrorCode_STRICT_ERROR_CODE_NEGATIVE_HITS, cluster.ErrNegativeHits},
		{"hits over count", r.Check("s", "k", 6), sluicev1.StrictErrorCode_STRICT_ERROR_CODE_HITS_OVER_COUNT, cluster.ErrHitsOverCount},
		{"other", errors.New("something else"), sluicev1.StrictErrorCode_STRICT_ERROR_CODE_OTHER, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("the replica accepted the check")
			}
			b, err := proto.Marshal(strictDecision(7, window.Decision{}, 42, tt.err))
			if err != nil {
				t.Fatal(err)
			}
			var d sluicev1.StrictDecision
			if err := proto.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			if d.GetCode() != tt.code {
				t.Errorf("code %v, want %v", d.GetCode(), tt.code)
			}
			_, got := fromStrict(&d)
			if got == nil {
				t.Fatal("the decision reads as decided")
			}
			if got.Error() != tt.err.Error() {
				t.Errorf("text %q, want the deciding node's %q", got, tt.err)
			}
			checkSentinel(t, "after the wire", got, tt.want)
		})
	}
}

// TestStrictCodeFromOtherVersions reads decisions as nodes of other
// versions send them: one older than codes (text only) is read as before
// codes, and a code this node does not know keeps its text and matches no
// sentinel.
func TestStrictCodeFromOtherVersions(t *testing.T) {
	tests := []struct {
		name     string
		d        *sluicev1.StrictDecision
		want     error // the sentinel it matches, if any
		wantText string
	}{
		{"decided", &sluicev1.StrictDecision{Allowed: true, Limit: 5}, nil, ""},
		// Before codes, errors were text alone: they stay text, and no
		// sentinel is read out of them.
		{"old unknown rule", &sluicev1.StrictDecision{Error: `unknown rule "nope"`}, nil, `unknown rule "nope"`},
		{"old negative hits", &sluicev1.StrictDecision{Error: "hits must be ≥ 0, got -1"}, nil, "hits must be ≥ 0, got -1"},
		{"newer code", &sluicev1.StrictDecision{Code: 99, Error: "a reason from the future"}, nil, "a reason from the future"},
		{"code without text", &sluicev1.StrictDecision{Code: sluicev1.StrictErrorCode_STRICT_ERROR_CODE_EMPTY_KEY}, cluster.ErrEmptyKey, cluster.ErrEmptyKey.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fromStrict(tt.d)
			if tt.wantText == "" {
				if err != nil {
					t.Fatalf("a decided check reads as %v", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantText {
				t.Fatalf("error %v, want %q", err, tt.wantText)
			}
			checkSentinel(t, tt.name, err, tt.want)
		})
	}
}

// oldStrictDecision is a StrictDecision as a node older than codes wrote
// it (fields 1 to 8).
func oldStrictDecision(id uint64, errText string, at int64) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, id)
	b = protowire.AppendTag(b, 7, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(at))
	b = protowire.AppendTag(b, 8, protowire.BytesType)
	return protowire.AppendString(b, errText)
}

// TestOldDecisionBytes decodes a decision in the bytes of a node older than
// codes: the code is unset and the error reads as it did then.
func TestOldDecisionBytes(t *testing.T) {
	var d sluicev1.StrictDecision
	if err := proto.Unmarshal(oldStrictDecision(3, `unknown rule "nope"`, 9), &d); err != nil {
		t.Fatal(err)
	}
	if d.GetCode() != sluicev1.StrictErrorCode_STRICT_ERROR_CODE_UNSPECIFIED {
		t.Errorf("code %v, want unset", d.GetCode())
	}
	_, err := fromStrict(&d)
	if err == nil || err.Error() != `unknown rule "nope"` {
		t.Fatalf("error %v, want the leader's text", err)
	}
	checkSentinel(t, "old bytes", err, nil)
}

// oldStrictEntry is a log entry in the bytes an older node wrote: the rule
// set, then checks (id, rule, key, hits), at now. Built field by field so
// that a change to StrictBatch's wire form fails this test.
func oldStrictEntry(now int64, rule window.Rule, checks []*sluicev1.StrictCheck) []byte {
	var spec []byte
	spec = protowire.AppendTag(spec, 1, protowire.BytesType)
	spec = protowire.AppendString(spec, rule.Name)
	spec = protowire.AppendTag(spec, 2, protowire.VarintType)
	spec = protowire.AppendVarint(spec, uint64(rule.Count))
	spec = protowire.AppendTag(spec, 3, protowire.VarintType)
	spec = protowire.AppendVarint(spec, uint64(rule.Window))
	spec = protowire.AppendTag(spec, 4, protowire.VarintType)
	spec = protowire.AppendVarint(spec, uint64(rule.Type))
	spec = protowire.AppendTag(spec, 5, protowire.VarintType)
	spec = protowire.AppendVarint(spec, uint64(rule.SyncInterval)) // -1: strict, as int64 varints are
	var set []byte
	set = protowire.AppendTag(set, 1, protowire.BytesType)
	set = protowire.AppendBytes(set, spec)

	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(now))
	for _, c := range checks {
		var cb []byte
		cb = protowire.AppendTag(cb, 1, protowire.VarintType)
		cb = protowire.AppendVarint(cb, c.GetId())
		cb = protowire.AppendTag(cb, 2, protowire.BytesType)
		cb = protowire.AppendString(cb, c.GetRule())
		cb = protowire.AppendTag(cb, 3, protowire.BytesType)
		cb = protowire.AppendString(cb, c.GetKey())
		cb = protowire.AppendTag(cb, 4, protowire.VarintType)
		cb = protowire.AppendVarint(cb, uint64(c.GetHits()))
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, cb)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, set)
}

// TestOldLogEntryReplays replays an entry an older node wrote: the log
// holds checks, not decisions, so every replica decides it anew, alike, and
// as the older node did (the same admissions, the same error texts), now
// with codes that map back to the sentinels.
func TestOldLogEntryReplays(t *testing.T) {
	rule := window.Rule{Name: "s", Count: 2, Window: time.Minute, Type: window.Fixed, SyncInterval: window.Strict}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	entry := &raft.Log{Index: 5, Type: raft.LogCommand, Data: oldStrictEntry(now, rule, []*sluicev1.StrictCheck{
		{Id: 1, Rule: "s", Key: "k", Hits: 2},
		{Id: 2, Rule: "s", Key: "k", Hits: 1},
		{Id: 3, Rule: "nope", Key: "k", Hits: 1},
		{Id: 4, Rule: "s", Key: "k", Hits: -1},
		{Id: 5, Rule: "s", Key: "k", Hits: 3},
	})}
	want := []struct {
		allowed bool
		text    string
		err     error
	}{
		{allowed: true},
		{allowed: false},
		{text: `unknown rule "nope"`, err: cluster.ErrUnknownRule},
		{text: "hits must be ≥ 0, got -1", err: cluster.ErrNegativeHits},
		{text: `hits exceed the rule's count and can never be admitted: hits 3, rule "s" count 2`, err: cluster.ErrHitsOverCount},
	}
	var replays [][]*sluicev1.StrictDecision
	for range 2 {
		f, err := newStrictFSM(nil) // as every replica starts: rules come from the log
		if err != nil {
			t.Fatal(err)
		}
		res := f.Apply(entry).(*strictResult)
		if res.err != nil {
			t.Fatalf("the old entry does not decode: %v", res.err)
		}
		replays = append(replays, res.decisions)
	}
	for i := range replays[0] {
		if !proto.Equal(replays[0][i], replays[1][i]) {
			t.Errorf("check %d: two replays decide %v and %v", i+1, replays[0][i], replays[1][i])
		}
	}
	if len(replays[0]) != len(want) {
		t.Fatalf("%d decisions, want %d", len(replays[0]), len(want))
	}
	for i, w := range want {
		sd := replays[0][i]
		d, err := fromStrict(sd)
		if sd.GetError() != w.text {
			t.Errorf("check %d: error text %q, want the older node's %q", i+1, sd.GetError(), w.text)
		}
		if w.text == "" {
			if err != nil || d.Allowed != w.allowed || sd.GetDecidedAt() != now {
				t.Errorf("check %d: %+v at %d (%v), want allowed %v at %d", i+1, d, sd.GetDecidedAt(), err, w.allowed, now)
			}
			continue
		}
		checkSentinel(t, sd.GetError(), err, w.err)
	}
}
