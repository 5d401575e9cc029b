package raftstore

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
)

// codecSamples are entries covering every field and flag combination.
var codecSamples = []raft.Log{
	{},
	{Index: 1, Data: []byte("log1")},
	{Index: 1 << 40, Term: 9, Type: raft.LogConfiguration, Data: []byte("conf"), Extensions: []byte("ext"),
		AppendedAt: time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC)},
	{Index: 2, Term: 1, Type: raft.LogNoop, Data: []byte{}, Extensions: []byte{}},
	{Index: math.MaxUint64, Term: math.MaxUint64, Type: raft.LogType(255), AppendedAt: time.Unix(0, math.MaxInt64).UTC()},
	{Index: 3, AppendedAt: time.Unix(0, math.MinInt64).UTC()},
	{Index: 4, AppendedAt: time.Unix(0, 0).UTC()},
	{Index: 5, Data: bytes.Repeat([]byte{0xab}, 300)},
}

func TestCodecRoundTrip(t *testing.T) {
	for _, want := range codecSamples {
		enc, err := encodeLog(&want)
		if err != nil {
			t.Fatalf("encodeLog(%#v): %v", want, err)
		}
		if len(enc) != encodedLogLen(&want) {
			t.Errorf("encodedLogLen = %d; encoding is %d bytes", encodedLogLen(&want), len(enc))
		}
		var got raft.Log
		if err := decodeLog(enc, &got); err != nil {
			t.Fatalf("decodeLog(encodeLog(%#v)): %v", want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip = %#v; want %#v", got, want)
		}
	}
}

func TestCodecIsCompact(t *testing.T) {
	// A typical small command: index and term fit in a few varint bytes.
	l := raft.Log{Index: 1000, Term: 3, Data: []byte("data"), AppendedAt: time.Unix(1700000000, 0)}
	enc, err := encodeLog(&l)
	if err != nil {
		t.Fatal(err)
	}
	// 3 header + 2 index + 1 term + 8 time + 1 length + 4 data.
	if len(enc) != 19 {
		t.Fatalf("encoding is %d bytes; want 19: %x", len(enc), enc)
	}
}

func TestCodecKnownEncoding(t *testing.T) {
	// Pin the version 1 layout: stored data must stay readable.
	l := raft.Log{Index: 300, Term: 2, Type: raft.LogCommand, Data: []byte("hi"), Extensions: []byte{7},
		AppendedAt: time.Unix(0, 0x0102030405060708).UTC()}
	want := []byte{
		1,          // version
		0b111,      // AppendedAt, Data, Extensions present
		0,          // LogCommand
		0xac, 0x02, // index 300
		0x02,                                           // term 2
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // appended at
		0x02, 'h', 'i', // data
		0x01, 7, // extensions
	}
	got, err := encodeLog(&l)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeLog = %x; want %x", got, want)
	}
}

func TestEncodeLogTimeOutOfRange(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if _, err := encodeLog(&raft.Log{Index: 1, AppendedAt: at}); err == nil {
			t.Errorf("encodeLog with AppendedAt %v succeeded; want error", at)
		}
	}
}

func TestDecodeLogErrors(t *testing.T) {
	valid, err := encodeLog(&codecSamples[2])
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		buf  []byte
	}{
		{name: "nil", buf: nil},
		{name: "short header", buf: []byte{1, 0}},
		{name: "unknown version", buf: []byte{2, 0, 0, 1, 1}},
		{name: "version zero", buf: []byte{0, 0, 0, 1, 1}},
		{name: "unknown flag", buf: []byte{1, 0x08, 0, 1, 1}},
		{name: "missing index", buf: []byte{1, 0, 0}},
		{name: "missing term", buf: []byte{1, 0, 0, 1}},
		{name: "unterminated varint", buf: []byte{1, 0, 0, 0x80}},
		{name: "varint overflow", buf: []byte{1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}},
		{name: "truncated time", buf: []byte{1, flagAppendedAt, 0, 1, 1, 0, 0, 0}},
		{name: "data length past end", buf: []byte{1, flagData, 0, 1, 1, 5, 'a'}},
		{name: "huge data length", buf: []byte{1, flagData, 0, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{name: "trailing bytes", buf: append(append([]byte(nil), valid...), 0)},
		{name: "truncated valid entry", buf: valid[:len(valid)-1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := raft.Log{Index: 77, Data: []byte("keep")}
			err := decodeLog(tt.buf, &l)
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("decodeLog(%x) = %v; want store.ErrCorrupt", tt.buf, err)
			}
			if l.Index != 77 || string(l.Data) != "keep" {
				t.Fatalf("failed decodeLog modified its output: %#v", l)
			}
		})
	}
}

func TestDecodeLogSlicesAreClipped(t *testing.T) {
	enc, err := encodeLog(&raft.Log{Data: []byte("ab"), Extensions: []byte("cd")})
	if err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := decodeLog(enc, &l); err != nil {
		t.Fatal(err)
	}
	_ = append(l.Data, 'X') // must not overwrite the extensions' length byte
	if string(l.Extensions) != "cd" || cap(l.Data) != 2 {
		t.Fatalf("appending to Data changed Extensions to %q (cap(Data) = %d)", l.Extensions, cap(l.Data))
	}
}

// FuzzDecodeLog checks that decodeLog never panics on arbitrary bytes, that
// whatever it accepts encodes again and decodes to the same entry, and that
// entries built from arbitrary field values survive encode then decode.
func FuzzDecodeLog(f *testing.F) {
	for _, l := range codecSamples {
		enc, err := encodeLog(&l)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc, l.Index, l.Term, uint8(l.Type), l.Data, l.Extensions, int64(0), uint8(0))
	}
	f.Add([]byte{}, uint64(0), uint64(0), uint8(0), []byte(nil), []byte(nil), int64(0), uint8(7))
	f.Add([]byte{1, 0xff, 0xff, 0xff}, uint64(1), uint64(1), uint8(1), []byte("x"), []byte("y"), int64(-1), uint8(1))

	f.Fuzz(func(t *testing.T, raw []byte, index, term uint64, typ uint8, data, ext []byte, nanos int64, shape uint8) {
		// Arbitrary bytes: decode must fail cleanly or give an entry that
		// round-trips.
		var dec raft.Log
		if err := decodeLog(raw, &dec); err == nil {
			enc, err := encodeLog(&dec)
			if err != nil {
				t.Fatalf("decoded entry %#v does not encode: %v", dec, err)
			}
			var again raft.Log
			if err := decodeLog(enc, &again); err != nil {
				t.Fatalf("re-encoded entry does not decode: %v", err)
			}
			if !reflect.DeepEqual(again, dec) {
				t.Fatalf("decode(encode(decode(raw))) = %#v; want %#v", again, dec)
			}
		} else if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("decode error %v does not wrap store.ErrCorrupt", err)
		}

		// Arbitrary fields: encode then decode must give the same entry.
		// shape's low bits choose nil slices and a zero time.
		want := raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext}
		if shape&1 != 0 {
			want.Data = nil
		} else if want.Data == nil {
			want.Data = []byte{}
		}
		if shape&2 != 0 {
			want.Extensions = nil
		} else if want.Extensions == nil {
			want.Extensions = []byte{}
		}
		if shape&4 == 0 {
			want.AppendedAt = time.Unix(0, nanos).UTC()
		}
		enc, err := encodeLog(&want)
		if err != nil {
			t.Fatalf("encodeLog(%#v): %v", want, err)
		}
		if len(enc) != encodedLogLen(&want) {
			t.Fatalf("encodedLogLen = %d; encoding is %d bytes", encodedLogLen(&want), len(enc))
		}
		var got raft.Log
		if err := decodeLog(enc, &got); err != nil {
			t.Fatalf("decodeLog(encodeLog(%#v)): %v", want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip = %#v; want %#v", got, want)
		}
	})
}
