package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// wireDeltaCases are counter deltas that must survive EncodeDelta, the wire
// and DecodeDelta unchanged. Every count is non-negative: EncodeDelta clamps
// negatives to 0.
func wireDeltaCases() []struct {
	name string
	in   counter.Delta
} {
	a := counter.Incarnation{Node: "node-a", Boot: 0xdeadbeefcafef00d}
	b := counter.Incarnation{Node: "node-b", Boot: 1}
	c := counter.Incarnation{Node: "node-c"} // boot 0 is a valid boot id
	return []struct {
		name string
		in   counter.Delta
	}{
		{name: "no rules", in: counter.Delta{From: a, Seq: 1, Incarnations: []counter.Incarnation{a}, Live: 1}},
		{name: "no incarnations nor rules", in: counter.Delta{From: b}},
		{name: "rule without entries", in: counter.Delta{From: a, Seq: 2, Incarnations: []counter.Incarnation{a}, Live: 3,
			Rules: []counter.RuleDelta{{Rule: "api"}}}},
		{name: "several rules and keys", in: counter.Delta{From: a, Seq: 42, Incarnations: []counter.Incarnation{a}, Live: 3,
			Rules: []counter.RuleDelta{
				{Rule: "api", Entries: []counter.Entry{
					{Key: "k1", Window: 1000, Admitted: 5, Demand: 7},
					{Key: "k2", Window: 1000, Admitted: 1, Demand: 1, Claim: 3, Need: 4},
					{Key: "k1", Window: 1001, Admitted: 2, Demand: 9},
				}},
				{Rule: "login", Entries: []counter.Entry{
					{Key: "user:1", Window: 77, Admitted: 1, Demand: 2},
				}},
				{Rule: "empty-after-full", Entries: []counter.Entry{}},
			}}},
		{name: "windows far apart", in: counter.Delta{From: a, Seq: 3, Incarnations: []counter.Incarnation{a}, Live: 2,
			Rules: []counter.RuleDelta{{Rule: "api", Entries: []counter.Entry{
				{Key: "base", Window: 1 << 39, Admitted: 1, Demand: 1},
				{Key: "below", Window: 0, Admitted: 2, Demand: 2},                  // offset -2^39
				{Key: "negative", Window: -(1 << 39) + 10, Admitted: 3, Demand: 3}, // offset -2^40 + 10
				{Key: "above", Window: 1<<39 + 10, Admitted: 4, Demand: 4},         // offset > 0; span 2^40
				{Key: "same", Window: 1 << 39, Admitted: 5, Demand: 5},             // offset 0
			}}, {Rule: "negative-base", Entries: []counter.Entry{
				{Key: "k", Window: -12345, Admitted: 1, Demand: 1},
				{Key: "k", Window: 1 << 39, Admitted: 1, Demand: 1},
				{Key: "k", Window: -(1 << 39), Admitted: 1, Demand: 1},
			}}, {Rule: "near-the-ends", Entries: []counter.Entry{
				{Key: "k", Window: math.MaxInt64, Admitted: 1, Demand: 1},
				{Key: "k", Window: math.MaxInt64 - 1<<40, Admitted: 1, Demand: 1},
			}}}}},
		{name: "openings", in: counter.Delta{From: a, Seq: 9, Ack: 7, Incarnations: []counter.Incarnation{a}, Live: 4,
			Rules: []counter.RuleDelta{{Rule: "fixed", Entries: []counter.Entry{
				{Key: "opens-zero", Window: 10, Admitted: 1, Demand: 1, Claim: 2, Need: 3, Opening: 0, Opens: true},
				{Key: "opens-some", Window: 10, Admitted: 1, Demand: 1, Claim: 2, Need: 3, Opening: 25, Opens: true},
				{Key: "no-opening", Window: 11, Admitted: 1, Demand: 1, Claim: 2, Need: 3},
			}}}}},
		{name: "full snapshot of several incarnations", in: counter.Delta{From: a, Seq: 0, Full: true,
			Incarnations: []counter.Incarnation{a, b, c}, Live: 3,
			Rules: []counter.RuleDelta{{Rule: "api", Entries: []counter.Entry{
				{Key: "k", Window: 5, Inc: 0, Admitted: 1, Demand: 2},
				{Key: "k", Window: 5, Inc: 1, Admitted: 3, Demand: 4},
				{Key: "k", Window: 4, Inc: 2, Admitted: 5, Demand: 6, Opening: 8, Opens: true},
			}}}}},
		{name: "counts at maxCount", in: counter.Delta{From: a, Seq: math.MaxUint64, Incarnations: []counter.Incarnation{a},
			Live: math.MaxInt32, Rules: []counter.RuleDelta{{Rule: "api", Entries: []counter.Entry{
				{Key: "k", Window: 1, Admitted: int64(maxCount), Demand: int64(maxCount), Claim: int64(maxCount),
					Need: int64(maxCount), Opening: int64(maxCount), Opens: true},
			}}}}},
		{name: "report to an owner", in: counter.Delta{From: b, Seq: 12, Kind: counter.KindReport,
			Incarnations: []counter.Incarnation{b, c}, Live: 3,
			Rules: []counter.RuleDelta{{Rule: "login", Entries: []counter.Entry{
				{Key: "alice", Window: 30, Admitted: 2, Prev: 4, Grant: 3, Rate: 5, RateFrom: -7, RateUntil: 9, Need: 1, Ask: 1, Told: 11, Pooled: true},
				{Key: "bob", Window: 30, Inc: 1, Admitted: 6}, // counts passed on for c
			}}}}},
		{name: "owner's answer", in: counter.Delta{From: a, Seq: 13, Kind: counter.KindAnswer,
			Incarnations: []counter.Incarnation{a}, Live: 3,
			Rules: []counter.RuleDelta{{Rule: "login", Entries: []counter.Entry{
				{Key: "alice", Window: 30, Admitted: 7, Prev: 9, Grant: 4, Rate: 2, RateFrom: 1 << 60, RateUntil: 1<<60 + 5, Next: 3, Told: 12},
			}}}}},
	}
}

// normDelta returns a copy of d with nil slices made empty, since the wire
// does not tell a nil slice from an empty one.
func normDelta(d *counter.Delta) counter.Delta {
	out := *d
	out.Incarnations = append([]counter.Incarnation{}, d.Incarnations...)
	out.Rules = make([]counter.RuleDelta, len(d.Rules))
	for i, rd := range d.Rules {
		out.Rules[i] = counter.RuleDelta{Rule: rd.Rule, Entries: append([]counter.Entry{}, rd.Entries...)}
	}
	return out
}

// wireTrip sends d through EncodeDelta, proto.Marshal, proto.Unmarshal and
// DecodeDelta, and returns the message as received and the decoded delta.
func wireTrip(tb testing.TB, d *counter.Delta) (*sluicev1.Delta, *counter.Delta, error) {
	tb.Helper()
	b, err := proto.Marshal(EncodeDelta(d))
	if err != nil {
		tb.Fatalf("marshal: %v", err)
	}
	var m sluicev1.Delta
	if err := proto.Unmarshal(b, &m); err != nil {
		tb.Fatalf("unmarshal: %v", err)
	}
	got, err := DecodeDelta(&m)
	return &m, got, err
}

// TestWireDeltaRoundTrip checks that counter deltas of every shape (no
// rules, several rules and keys, windows far apart on either side of the
// base, openings present or not) come back equal after EncodeDelta,
// marshalling, unmarshalling and DecodeDelta; that an entry without Opens
// carries no opening field at all; and that Opens with a zero Opening
// survives as Opens.
func TestWireDeltaRoundTrip(t *testing.T) {
	for _, tt := range wireDeltaCases() {
		t.Run(tt.name, func(t *testing.T) {
			enc := EncodeDelta(&tt.in)
			for i, rd := range tt.in.Rules {
				for j, e := range rd.Entries {
					we := enc.GetRules()[i].GetEntries()[j]
					if want := e.Window - enc.GetRules()[i].GetBaseWindow(); we.GetWindowOffset() != want {
						t.Errorf("rule %q entry %d: window_offset %d, want %d", rd.Rule, j, we.GetWindowOffset(), want)
					}
					if e.Opens != (we.Opening != nil) {
						t.Errorf("rule %q entry %d: Opens %v but opening field present = %v", rd.Rule, j, e.Opens, we.Opening != nil)
					}
				}
			}

			m, got, err := wireTrip(t, &tt.in)
			if err != nil {
				t.Fatalf("DecodeDelta: %v", err)
			}
			for i, rd := range tt.in.Rules {
				for j, e := range rd.Entries {
					we := m.GetRules()[i].GetEntries()[j]
					if !e.Opens && (we.Opening != nil || we.GetOpening() != 0) {
						t.Errorf("rule %q entry %d: no Opens, yet the received opening field is %v", rd.Rule, j, we.Opening)
					}
					if e.Opens && we.Opening == nil {
						t.Errorf("rule %q entry %d: Opens with Opening %d arrived without the opening field", rd.Rule, j, e.Opening)
					}
					if g := got.Rules[i].Entries[j]; g.Opens != e.Opens {
						t.Errorf("rule %q entry %d: Opens %v after the round trip, want %v", rd.Rule, j, g.Opens, e.Opens)
					}
				}
			}
			if g, w := normDelta(got), normDelta(&tt.in); !reflect.DeepEqual(g, w) {
				t.Fatalf("round trip changed the delta:\n got %+v\nwant %+v", g, w)
			}
		})
	}
}

// TestWireDeltaOpeningNeedsOpens checks that an Opening without Opens is not
// sent: it arrives as no opening at all, not as an opening of that size.
func TestWireDeltaOpeningNeedsOpens(t *testing.T) {
	a := counter.Incarnation{Node: "a", Boot: 1}
	in := counter.Delta{From: a, Incarnations: []counter.Incarnation{a}, Rules: []counter.RuleDelta{{Rule: "r",
		Entries: []counter.Entry{{Key: "k", Window: 1, Admitted: 1, Demand: 1, Opening: 9}}}}}
	m, got, err := wireTrip(t, &in)
	if err != nil {
		t.Fatal(err)
	}
	if we := m.GetRules()[0].GetEntries()[0]; we.Opening != nil {
		t.Fatalf("opening field %d sent without Opens", *we.Opening)
	}
	if e := got.Rules[0].Entries[0]; e.Opens || e.Opening != 0 {
		t.Fatalf("received Opens=%v Opening=%d, want neither", e.Opens, e.Opening)
	}
}

// TestWireDecodeDeltaRejects checks that DecodeDelta refuses every kind of
// malformed message wire.go guards against, with an error that wraps
// ErrBadDelta and names what is wrong, and returns no delta with it.
func TestWireDecodeDeltaRejects(t *testing.T) {
	from := &sluicev1.Incarnation{Node: "peer", Boot: 7}
	u := func(v uint64) *uint64 { return &v }
	// one is a valid delta of one entry, changed by edit.
	one := func(edit func(*sluicev1.Entry)) *sluicev1.Delta {
		e := &sluicev1.Entry{Key: "k", WindowOffset: 0, Admitted: 1, Demand: 1}
		if edit != nil {
			edit(e)
		}
		return &sluicev1.Delta{From: from, Incarnations: []*sluicev1.Incarnation{from},
			Rules: []*sluicev1.RuleDelta{{Rule: "api", BaseWindow: 100, Entries: []*sluicev1.Entry{e}}}}
	}
	if _, err := DecodeDelta(one(nil)); err != nil {
		t.Fatalf("the valid base message is refused: %v", err)
	}
	tooMany := make([]*sluicev1.Incarnation, maxIncarnationsPerDelta+1)
	for i := range tooMany {
		tooMany[i] = from
	}
	atMost := make([]*sluicev1.Incarnation, maxIncarnationsPerDelta)
	copy(atMost, tooMany)
	if _, err := DecodeDelta(&sluicev1.Delta{From: from, Incarnations: atMost}); err != nil {
		t.Fatalf("%d incarnations are refused: %v", maxIncarnationsPerDelta, err)
	}

	tests := []struct {
		name string
		msg  *sluicev1.Delta
		want []string // substrings of the error text
	}{
		{"nil message", nil, []string{"empty message"}},
		{"no from", &sluicev1.Delta{}, []string{"from", "no node name"}},
		{"from without node name", &sluicev1.Delta{From: &sluicev1.Incarnation{Boot: 1}}, []string{"from", "no node name"}},
		{"from node name too long", &sluicev1.Delta{From: &sluicev1.Incarnation{Node: strings.Repeat("n", 257)}},
			[]string{"from", "257 bytes"}},
		{"nil incarnation", &sluicev1.Delta{From: from, Incarnations: []*sluicev1.Incarnation{from, nil}},
			[]string{`"peer"`, "incarnation 1", "no node name"}},
		{"incarnation without node name", &sluicev1.Delta{From: from,
			Incarnations: []*sluicev1.Incarnation{{Node: "", Boot: 3}}}, []string{"incarnation 0", "no node name"}},
		{"incarnation node name too long", &sluicev1.Delta{From: from,
			Incarnations: []*sluicev1.Incarnation{from, {Node: strings.Repeat("x", 300)}}}, []string{"incarnation 1", "300 bytes"}},
		{"too many incarnations", &sluicev1.Delta{From: from, Incarnations: tooMany},
			[]string{`"peer"`, "incarnations: 65537 in one delta, at most 65536"}},
		{"empty rule name", &sluicev1.Delta{From: from, Incarnations: []*sluicev1.Incarnation{from},
			Rules: []*sluicev1.RuleDelta{{Rule: "", Entries: []*sluicev1.Entry{{Key: "k"}}}}}, []string{"no rule name"}},
		{"empty rule name without entries", &sluicev1.Delta{From: from,
			Rules: []*sluicev1.RuleDelta{{Rule: "ok"}, {}}}, []string{"no rule name"}},
		{"window offset overflows up", func() *sluicev1.Delta {
			m := one(func(e *sluicev1.Entry) { e.WindowOffset = 1 })
			m.Rules[0].BaseWindow = math.MaxInt64
			return m
		}(), []string{`rule "api"`, `key "k"`, "window overflows"}},
		{"window offset overflows up from zero-ish base", func() *sluicev1.Delta {
			m := one(func(e *sluicev1.Entry) { e.WindowOffset = math.MaxInt64 })
			m.Rules[0].BaseWindow = 1
			return m
		}(), []string{"window overflows"}},
		{"window offset overflows down", func() *sluicev1.Delta {
			m := one(func(e *sluicev1.Entry) { e.WindowOffset = -1 })
			m.Rules[0].BaseWindow = math.MinInt64
			return m
		}(), []string{"window overflows"}},
		{"window offset overflows down by MinInt64", func() *sluicev1.Delta {
			m := one(func(e *sluicev1.Entry) { e.WindowOffset = math.MinInt64 })
			m.Rules[0].BaseWindow = -1
			return m
		}(), []string{"window overflows"}},
		{"windows span the whole int64 range", func() *sluicev1.Delta {
			m := one(func(e *sluicev1.Entry) { e.WindowOffset = math.MinInt64 })
			m.Rules[0].Entries = append(m.Rules[0].Entries, &sluicev1.Entry{Key: "b", WindowOffset: math.MaxInt64})
			m.Rules[0].BaseWindow = 0
			return m
		}(), []string{`rule "api"`, `key "b"`, "windows span more than 2^40"}},
		{"windows span just over 2^40", func() *sluicev1.Delta {
			m := one(func(e *sluicev1.Entry) { e.WindowOffset = -1 })
			m.Rules[0].Entries = append(m.Rules[0].Entries, &sluicev1.Entry{Key: "b", WindowOffset: 1 << 40})
			return m
		}(), []string{"windows span more than 2^40"}},
		{"unknown kind", func() *sluicev1.Delta {
			m := one(nil)
			m.Kind = sluicev1.Kind(7)
			return m
		}(), []string{`"peer"`, "kind 7 is unknown"}},
		{"grant over maxCount", one(func(e *sluicev1.Entry) { e.Grant = maxCount + 1 }), []string{"grant", "out of range"}},
		{"ask over maxCount", one(func(e *sluicev1.Entry) { e.Ask = math.MaxUint64 }), []string{"ask", "out of range"}},
		{"next over maxCount", one(func(e *sluicev1.Entry) { e.Next = maxCount + 1 }), []string{"next", "out of range"}},
		{"admitted over maxCount", one(func(e *sluicev1.Entry) { e.Admitted = maxCount + 1 }),
			[]string{"admitted 4611686018427387905 is out of range"}},
		{"demand over maxCount", one(func(e *sluicev1.Entry) { e.Demand = math.MaxUint64 }),
			[]string{"demand 18446744073709551615 is out of range"}},
		{"claim over maxCount", one(func(e *sluicev1.Entry) { e.Claim = maxCount + 1 }), []string{"claim", "out of range"}},
		{"need over maxCount", one(func(e *sluicev1.Entry) { e.Need = 1 << 63 }), []string{"need", "out of range"}},
		{"opening over maxCount", one(func(e *sluicev1.Entry) { e.Opening = u(maxCount + 1) }),
			[]string{`key "k"`, "opening 4611686018427387905 is out of range"}},
		{"inc out of range", one(func(e *sluicev1.Entry) { e.Inc = 1 }), []string{`key "k"`, "names incarnation 1 of 1"}},
		{"inc with no incarnations", &sluicev1.Delta{From: from,
			Rules: []*sluicev1.RuleDelta{{Rule: "api", Entries: []*sluicev1.Entry{{Key: "k"}}}}},
			[]string{"names incarnation 0 of 0"}},
		{"inc far out of range", one(func(e *sluicev1.Entry) { e.Inc = math.MaxUint32 }),
			[]string{"names incarnation 4294967295 of 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeDelta(tt.msg)
			if err == nil {
				t.Fatalf("DecodeDelta accepted it: %+v", d)
			}
			if !errors.Is(err, ErrBadDelta) {
				t.Errorf("error %q does not wrap ErrBadDelta", err)
			}
			if d != nil {
				t.Errorf("DecodeDelta returned %+v with its error", d)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestParseDeltaSize checks that a peer's delta (ParseDelta) holds at
// most MaxDeltaEntries entries and rules, refused naming which, with
// ErrDeltaTooLarge, while what a node saved or logged (DecodeDelta) may
// hold any number, and that a node's own deltas split to SplitEntries
// stay well within both bounds.
func TestParseDeltaSize(t *testing.T) {
	from := &sluicev1.Incarnation{Node: "peer", Boot: 1}
	withEntries := func(rules, perRule int) *sluicev1.Delta {
		m := &sluicev1.Delta{From: from, Incarnations: []*sluicev1.Incarnation{from}}
		for r := range rules {
			rd := &sluicev1.RuleDelta{Rule: "r" + strconv.Itoa(r), BaseWindow: 100}
			for i := range perRule {
				rd.Entries = append(rd.Entries, &sluicev1.Entry{Key: "k" + strconv.Itoa(i), Admitted: 1})
			}
			m.Rules = append(m.Rules, rd)
		}
		return m
	}
	tests := []struct {
		name    string
		msg     *sluicev1.Delta
		wantErr string // "" for none
	}{
		{"entries at the bound", withEntries(2, MaxDeltaEntries/2), ""},
		{"entries past the bound", withEntries(2, MaxDeltaEntries/2+1), "entries: 65538 in one delta, at most 65536"},
		{"entries past the bound in one rule", withEntries(1, MaxDeltaEntries+5), "entries: 65541 in one delta, at most 65536"},
		{"rules at the bound", withEntries(MaxDeltaEntries, 0), ""},
		{"rules past the bound", withEntries(MaxDeltaEntries+1, 0), "rules: 65537 in one delta, at most 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := proto.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			d, _, err := ParseDelta(b)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ParseDelta: %v", err)
			case tt.wantErr != "" && (err == nil || !errors.Is(err, ErrDeltaTooLarge) || !errors.Is(err, ErrBadDelta) ||
				!strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `"peer"`)):
				t.Fatalf("ParseDelta: %v; want ErrDeltaTooLarge from \"peer\" saying %q", err, tt.wantErr)
			case tt.wantErr != "" && d != nil:
				t.Fatalf("ParseDelta returned %d entries with its error", d.Size())
			}
			// Saved or logged, the same delta is read whole.
			if d, err := DecodeDelta(tt.msg); err != nil || d.Size() != len(tt.msg.GetRules())*len(tt.msg.GetRules()[0].GetEntries()) {
				t.Fatalf("DecodeDelta: %v", err)
			}
		})
	}
	// SplitEntries entries of the longest keys fit a gRPC message, and
	// within the bound.
	if SplitEntries > MaxDeltaEntries {
		t.Fatalf("SplitEntries %d over MaxDeltaEntries %d", SplitEntries, MaxDeltaEntries)
	}
	full := func(v uint64) *uint64 { return &v }
	m := &sluicev1.Delta{From: from, Incarnations: []*sluicev1.Incarnation{from}}
	rd := &sluicev1.RuleDelta{Rule: strings.Repeat("r", 130), BaseWindow: math.MaxInt64 / 2}
	for i := range SplitEntries {
		rd.Entries = append(rd.Entries, &sluicev1.Entry{Key: strconv.Itoa(i) + strings.Repeat("k", 1024-len(strconv.Itoa(i))),
			WindowOffset: -1, Inc: math.MaxUint32, Admitted: maxCount, Demand: maxCount, Claim: maxCount, Need: maxCount,
			Prev: maxCount, Grant: maxCount, Rate: maxCount, RateFrom: math.MaxInt64, Next: maxCount, Ask: maxCount,
			Told: math.MaxUint64, RateUntil: math.MaxInt64, Pooled: true, Opening: full(maxCount)})
	}
	m.Rules = []*sluicev1.RuleDelta{rd}
	if n := proto.Size(m); n > 5<<20 {
		t.Fatalf("%d entries of the longest keys and counts take %d bytes, over 5 MiB", SplitEntries, n)
	}
}

// FuzzDecodeDelta checks that DecodeDelta never panics on any message a
// peer, the saved counts or a strict log entry could hold, that every error
// wraps ErrBadDelta, and that whatever it accepts survives EncodeDelta and
// the wire and decodes again to the same delta.
func FuzzDecodeDelta(f *testing.F) {
	for _, tt := range wireDeltaCases() {
		b, err := proto.Marshal(EncodeDelta(&tt.in))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if len(b) > 3 {
			f.Add(b[:len(b)-3]) // cut short
		}
	}
	over := uint64(maxCount + 1)
	for _, m := range []*sluicev1.Delta{
		{From: &sluicev1.Incarnation{Node: "p"}, Incarnations: []*sluicev1.Incarnation{{Node: "p"}},
			Rules: []*sluicev1.RuleDelta{{Rule: "r", BaseWindow: math.MaxInt64, Entries: []*sluicev1.Entry{
				{Key: "k", WindowOffset: math.MinInt64, Opening: &over}, {Key: "k", WindowOffset: 1}}}}},
		{From: &sluicev1.Incarnation{Node: "p"}, Rules: []*sluicev1.RuleDelta{{Entries: []*sluicev1.Entry{{Inc: 3}}}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Windows MinInt64 and MaxInt64 in one rule: once accepted, and then
	// not encodable again as offsets from one base.
	spread, err := hex.DecodeString("0a030a01701a030a017032230a01721a0e0a016110ffffffffffffffffff011a0e0a016210feffffffffffffffff01")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(spread)
	for _, junk := range [][]byte{nil, {0}, {0xff}, {0x0a, 0x80}, {0x32, 0x05, 0x1a, 0x03, 0x40, 0xff, 0x01},
		[]byte("not a protobuf at all"), bytes.Repeat([]byte{0x1a, 0x00}, 64)} {
		f.Add(junk)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		var m sluicev1.Delta
		if err := proto.Unmarshal(data, &m); err != nil {
			t.Skip()
		}
		d, err := DecodeDelta(&m)
		if err != nil {
			if !errors.Is(err, ErrBadDelta) {
				t.Fatalf("error %q does not wrap ErrBadDelta", err)
			}
			if d != nil {
				t.Fatalf("DecodeDelta returned %+v with error %v", d, err)
			}
			return
		}
		_, again, err := wireTrip(t, d)
		if err != nil {
			t.Fatalf("accepted delta %+v does not decode after EncodeDelta: %v", d, err)
		}
		if g, w := normDelta(again), normDelta(d); !reflect.DeepEqual(g, w) {
			t.Fatalf("decode(encode(decode(data))) differs:\n got %+v\nwant %+v", g, w)
		}
	})
}

// FuzzDecodeRules checks that DecodeRules, which reads the strict rules of
// raft log entries and snapshots, never panics, returns only rules that
// validate, and that what it accepts survives EncodeRules and the wire.
func FuzzDecodeRules(f *testing.F) {
	for _, rules := range [][]window.Rule{
		nil,
		{{Name: "lin-sliding", Count: 60, Window: 2 * time.Second, Type: window.Sliding, SyncInterval: window.Strict},
			{Name: "lin-fixed", Count: 40, Window: 1500 * time.Millisecond, Type: window.Fixed, SyncInterval: window.Strict}},
		{{Name: "batched", Count: 1 << 40, Window: time.Hour, Type: window.Fixed, SyncInterval: 10 * time.Millisecond,
			Allocation: window.Classic}},
		{{Name: "a:b.c-d_e", Count: 1, Window: time.Millisecond, SyncInterval: window.Strict, FailMode: window.FailClosed}},
	} {
		b, err := proto.Marshal(EncodeRules(rules))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, m := range []*sluicev1.RuleSet{
		{Rules: []*sluicev1.RuleSpec{{Name: "x", Count: 1, WindowNs: 1e9, SyncIntervalNs: -1, Type: 256}}},
		{Rules: []*sluicev1.RuleSpec{{Name: "x", Count: 1, WindowNs: 1e9, SyncIntervalNs: 1e9}}},
		{Rules: []*sluicev1.RuleSpec{{Name: "bad name", Count: 0, WindowNs: -1}}},
		{Rules: []*sluicev1.RuleSpec{{}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff})
	f.Add([]byte("junk"))

	f.Fuzz(func(t *testing.T, data []byte) {
		var m sluicev1.RuleSet
		if err := proto.Unmarshal(data, &m); err != nil {
			t.Skip()
		}
		rules, err := DecodeRules(&m)
		if err != nil {
			if rules != nil {
				t.Fatalf("DecodeRules returned %+v with error %v", rules, err)
			}
			return
		}
		if len(rules) != len(m.GetRules()) {
			t.Fatalf("DecodeRules returned %d rules of %d", len(rules), len(m.GetRules()))
		}
		for i := range rules {
			if err := rules[i].Validate(); err != nil {
				t.Fatalf("accepted rule %d does not validate: %v", i, err)
			}
		}
		b, err := proto.Marshal(EncodeRules(rules))
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back sluicev1.RuleSet
		if err := proto.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		again, err := DecodeRules(&back)
		if err != nil {
			t.Fatalf("accepted rules %+v do not decode after EncodeRules: %v", rules, err)
		}
		if !reflect.DeepEqual(again, rules) {
			t.Fatalf("decode(encode(decode(data))) differs:\n got %+v\nwant %+v", again, rules)
		}
	})
}
