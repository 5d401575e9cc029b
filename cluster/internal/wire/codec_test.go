package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// genWireDelta draws a delta as a node builds one: entries of any kind with
// counts in range.
func genWireDelta(t *rapid.T) *counter.Delta {
	node := func(label string) counter.Incarnation {
		return counter.Incarnation{Node: rapid.StringMatching(`[a-z0-9-]{1,12}`).Draw(t, label), Boot: rapid.Uint64().Draw(t, label+"Boot")}
	}
	d := &counter.Delta{From: node("from"), Seq: rapid.Uint64().Draw(t, "seq"), Live: rapid.IntRange(0, 500).Draw(t, "live"),
		Full: rapid.Bool().Draw(t, "full"), Ack: rapid.Uint64().Draw(t, "ack"),
		Kind: counter.Kind(rapid.IntRange(0, int(counter.KindView)).Draw(t, "kind"))}
	d.Incarnations = []counter.Incarnation{d.From}
	for range rapid.IntRange(0, 3).Draw(t, "incs") {
		d.Incarnations = append(d.Incarnations, node("inc"))
	}
	count := func(label string) int64 { return rapid.Int64Range(0, int64(maxCount)).Draw(t, label) }
	for range rapid.IntRange(0, 3).Draw(t, "rules") {
		rd := counter.RuleDelta{Rule: rapid.StringMatching(`[a-z]{1,8}`).Draw(t, "rule")}
		base := rapid.Int64Range(-1<<50, 1<<50).Draw(t, "base")
		for range rapid.IntRange(0, 5).Draw(t, "entries") {
			rd.Entries = append(rd.Entries, counter.Entry{
				Key: rapid.StringMatching(`[a-z:0-9]{1,200}`).Draw(t, "key"), Window: base + rapid.Int64Range(-3, 3).Draw(t, "off"),
				Inc: uint32(rapid.IntRange(0, len(d.Incarnations)-1).Draw(t, "inc")), Admitted: count("admitted"),
				Demand: count("demand"), Claim: count("claim"), Need: count("need"), Opening: count("opening"),
				Opens: rapid.Bool().Draw(t, "opens"), Prev: count("prev"), Grant: count("grant"), Rate: count("rate"),
				RateFrom: rapid.Int64().Draw(t, "from"), Next: count("next"), Ask: count("ask"), Told: rapid.Uint64().Draw(t, "told"),
				RateUntil: rapid.Int64().Draw(t, "until"), Pooled: rapid.Bool().Draw(t, "pooled"),
			})
		}
		for i := range rd.Entries {
			if !rd.Entries[i].Opens {
				rd.Entries[i].Opening = 0 // sent only with Opens
			}
		}
		d.Rules = append(d.Rules, rd)
	}
	return d
}

// TestAppendDeltaIsTheProtobuf checks that AppendDelta writes what
// proto.Marshal writes of the message EncodeDelta builds, byte for byte, so
// that a peer reading sluice.v1.Delta with generated code reads it, and
// that ParseDelta reads back what was written.
func TestAppendDeltaIsTheProtobuf(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genWireDelta(t)
		sentAt := rapid.Int64().Draw(t, "sentAt")
		m := EncodeDelta(d)
		m.SentAt = sentAt
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendDelta(nil, d, sentAt)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendDelta wrote\n%x\nproto.Marshal writes\n%x", got, want)
		}
		if n := DeltaSize(d, sentAt); n != len(got) {
			t.Fatalf("DeltaSize %d, wrote %d bytes", n, len(got))
		}
		back, at, err := ParseDelta(got)
		if err != nil {
			t.Fatalf("ParseDelta of what AppendDelta wrote: %v", err)
		}
		if at != sentAt || !reflect.DeepEqual(normDelta(back), normDelta(d)) {
			t.Fatalf("read back %+v sent at %d, wrote %+v sent at %d", back, at, d, sentAt)
		}
	})
}

// FuzzParseDelta checks that ParseDelta never panics on any bytes, that
// what it refuses is an error wrapping ErrBadDelta with no delta, that it
// agrees with decoding through the generated code, and that what it accepts
// reads back the same after AppendDelta.
func FuzzParseDelta(f *testing.F) {
	for _, tt := range wireDeltaCases() {
		b := AppendDelta(nil, &tt.in, 42)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, junk := range [][]byte{nil, {0}, {0xff}, {0x0a, 0x80}, {0x32, 0x05, 0x1a, 0x03, 0x40, 0xff, 0x01},
		[]byte("not a protobuf at all"), bytes.Repeat([]byte{0x1a, 0x00}, 64), {0x0b, 0x0c}} {
		f.Add(junk)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, sentAt, err := ParseDelta(data)
		if err != nil {
			if !errors.Is(err, ErrBadDelta) {
				t.Fatalf("error %q does not wrap ErrBadDelta", err)
			}
			if d != nil {
				t.Fatalf("ParseDelta returned %+v with error %v", d, err)
			}
			return
		}
		back, at, err := ParseDelta(AppendDelta(nil, d, sentAt))
		if err != nil {
			t.Fatalf("accepted delta %+v does not read back: %v", d, err)
		}
		if at != sentAt || !reflect.DeepEqual(normDelta(back), normDelta(d)) {
			t.Fatalf("parse(append(parse(data))) differs:\n got %+v\nwant %+v", back, d)
		}
		// What the generated code reads of the same bytes decodes alike.
		var m sluicev1.Delta
		if err := proto.Unmarshal(data, &m); err == nil {
			if viaProto, err := DecodeDelta(&m); err != nil {
				t.Fatalf("ParseDelta accepted what DecodeDelta refuses: %v", err)
			} else if !reflect.DeepEqual(normDelta(viaProto), normDelta(d)) {
				t.Fatalf("ParseDelta and DecodeDelta differ:\n%+v\n%+v", d, viaProto)
			}
		}
	})
}
