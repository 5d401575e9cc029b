package cluster

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// rawCodec is a client's codec that sends a request's bytes as they are, so
// that a test can send what a client not written in Go may (a string that
// is not UTF-8, which protobuf-go will not marshal), and decodes answers
// as protobuf.
type rawCodec struct{}

// rawRequest is a request already on the wire.
type rawRequest []byte

func (rawCodec) Name() string { return protoCodecName }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawRequest))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// wireCheck is a sluice.v1.CheckRequest written by hand: its rule and key
// go on the wire as they are, UTF-8 or not.
func wireCheck(rule, key string, hits int64) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, rule)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(hits))
}

// wireBatch is a sluice.v1.CheckBatchRequest of checks written by hand.
func wireBatch(checks ...[]byte) []byte {
	var b []byte
	for _, c := range checks {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, c)
	}
	return b
}

// TestInvalidUTF8OverGRPC sends a real node, over its own gRPC port, the
// checks a client not written in Go can send: a key or rule that is not
// UTF-8 is refused InvalidArgument naming the field (in a batch, the
// check's index too) and spends nothing, where gRPC answered Internal
// before any handler ran. Services that do not check their strings keep
// protobuf's refusal.
func TestInvalidUTF8OverGRPC(t *testing.T) {
	clock := &svcClock{}
	clock.ns.Store(svcEpoch)
	node, err := Start(context.Background(), Config{Name: "utf8", Rules: []window.Rule{svcFixed},
		GRPCAddr: "127.0.0.1:0", Now: clockOf(clock.Now), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	conn, err := grpc.NewClient(node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	check := sluicev1.Limiter_Check_FullMethodName
	batch := sluicev1.Limiter_CheckBatch_FullMethodName
	tests := []struct {
		name     string
		method   string
		req      []byte
		reply    proto.Message
		code     codes.Code
		message  string // a substring of the status message
		remains  int64  // what key "k" has left afterwards
		answered func(proto.Message) bool
	}{
		{"valid, by hand", check, wireCheck("fixed", "k", 1), &sluicev1.CheckResponse{}, codes.OK, "", 2,
			func(m proto.Message) bool {
				r := m.(*sluicev1.CheckResponse)
				return r.GetAllowed() && r.GetRemaining() == 2
			}},
		{"key not UTF-8", check, wireCheck("fixed", "user:\xff", 1), &sluicev1.CheckResponse{}, codes.InvalidArgument,
			"key must be valid UTF-8, got byte 0xFF at offset 5", 2, nil},
		{"key cut inside a rune", check, wireCheck("fixed", "é"[:1], 1), &sluicev1.CheckResponse{}, codes.InvalidArgument,
			"key must be valid UTF-8", 2, nil},
		{"rule not UTF-8", check, wireCheck("fixed\xff", "k", 1), &sluicev1.CheckResponse{}, codes.InvalidArgument,
			`unknown rule "fixed\xff": rule must be valid UTF-8`, 2, nil},
		{"batch, second key not UTF-8", batch, wireBatch(wireCheck("fixed", "k", 1), wireCheck("fixed", "\xc0\xaf", 1)),
			&sluicev1.CheckBatchResponse{}, codes.InvalidArgument, "checks[1]: key must be valid UTF-8, got byte 0xC0 at offset 0", 2, nil},
		{"batch, first rule not UTF-8", batch, wireBatch(wireCheck("\xfe", "k", 1), wireCheck("fixed", "k", 1)),
			&sluicev1.CheckBatchResponse{}, codes.InvalidArgument, `checks[0]: unknown rule "\xfe": rule must be valid UTF-8`, 2, nil},
		{"batch, valid, by hand", batch, wireBatch(wireCheck("fixed", "k", 1), wireCheck("fixed", "é", 1)),
			&sluicev1.CheckBatchResponse{}, codes.OK, "", 1,
			func(m proto.Message) bool { r := m.(*sluicev1.CheckBatchResponse); return len(r.GetResults()) == 2 }},
		// Malformed past the string as well: still refused as protobuf
		// refuses it.
		{"key not UTF-8, then cut short", check, append(wireCheck("fixed", "\xff", 1), 0x22, 5), &sluicev1.CheckResponse{}, codes.Internal,
			"string field contains invalid UTF-8 (read with bytes for strings: ", 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			req := rawRequest(tt.req)
			err := conn.Invoke(ctx, tt.method, &req, tt.reply, grpc.ForceCodecV2(rawCodec{}))
			st := status.Convert(err)
			if st.Code() != tt.code || !strings.Contains(st.Message(), tt.message) {
				t.Fatalf("%s: %v, want %v with %q", tt.method, err, tt.code, tt.message)
			}
			if tt.answered != nil && !tt.answered(tt.reply) {
				t.Fatalf("answer %v", tt.reply)
			}
			if d, err := node.Allow(ctx, svcFixed.Name, "k", 0); err != nil || d.Remaining != tt.remains {
				t.Fatalf("key k has %d left (%v), want %d", d.Remaining, err, tt.remains)
			}
		})
	}

	// A service that does not check its strings is not given them.
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	var health []byte
	health = protowire.AppendTag(health, 1, protowire.BytesType)
	health = protowire.AppendString(health, "sluice\xff")
	req := rawRequest(health)
	err = conn.Invoke(ctx, healthpb.Health_Check_FullMethodName, &req, &healthpb.HealthCheckResponse{}, grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "invalid UTF-8") {
		t.Fatalf("health check of a service name that is not UTF-8: %v, want protobuf's refusal", err)
	}
}

// decodeCases are requests on the wire that protobuf-go decodes: the
// server's codec must decode each exactly as it does.
func decodeCases() map[string][]byte {
	unknown := protowire.AppendTag(wireCheck("api", "k", 1), 99, protowire.BytesType)
	unknown = protowire.AppendString(unknown, "a field of a newer client")
	twice := append(wireCheck("api", "first", 1), wireCheck("api", "last", 2)...) // the last value wins
	out := map[string][]byte{
		"check":              wireCheck("api", "user:42", 1),
		"check, unicode":     wireCheck("api", "user:é漢😀", 7),
		"check, zero fields": wireCheck("", "", 0),
		"check, negative":    wireCheck("api", "k", -1),
		"check, unknown":     unknown,
		"check, twice":       twice,
		"empty":              nil,
		"batch":              wireBatch(wireCheck("a", "k1", 1), wireCheck("b", "k2", 0), nil),
		"batch of unknowns":  wireBatch(unknown, twice),
	}
	big := make([][]byte, MaxBatchChecks)
	for i := range big {
		big[i] = wireCheck("api", "user:"+strings.Repeat("x", i%40), int64(i))
	}
	out["batch of 1000"] = wireBatch(big...)
	return out
}

// TestServerCodecDecodesValidAsBefore: every valid request decodes through
// the server's codec as through protobuf's, and through the lenient
// decoder too, so that a message read the second way means what it would
// have meant the first.
func TestServerCodecDecodesValidAsBefore(t *testing.T) {
	codec := newServerCodec()
	codec.lenient.accept(&sluicev1.CheckRequest{}, &sluicev1.CheckBatchRequest{})
	for name, b := range decodeCases() {
		for _, newMsg := range []func() proto.Message{
			func() proto.Message { return &sluicev1.CheckRequest{} },
			func() proto.Message { return &sluicev1.CheckBatchRequest{} },
		} {
			want, got, lenient := newMsg(), newMsg(), newMsg()
			wantErr := proto.Unmarshal(b, want)
			if invalidUTF8(wantErr) {
				continue // (a batch read as a check: its checks are a string)
			}
			gotErr := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)
			if (wantErr == nil) != (gotErr == nil) || wantErr == nil && !proto.Equal(got, want) {
				t.Errorf("%s as %T: codec %v, %v; protobuf %v, %v", name, want, got, gotErr, want, wantErr)
			}
			if wantErr != nil {
				continue
			}
			if ok, err := codec.lenient.unmarshal(b, lenient); !ok || err != nil || !proto.Equal(lenient, want) {
				t.Errorf("%s as %T: read with bytes for strings %v (%v, %v), want %v", name, want, lenient, ok, err, want)
			}
		}
	}

	// And a request that is not UTF-8 holds the bytes sent.
	b := wireBatch(wireCheck("api", "k\xff", 3), append(wireCheck("r\xfe", "ok", 0), unknownField()...))
	var got sluicev1.CheckBatchRequest
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
		t.Fatal(err)
	}
	want := &sluicev1.CheckBatchRequest{Checks: []*sluicev1.CheckRequest{{Rule: "api", Key: "k\xff", Hits: 3}, {Rule: "r\xfe", Key: "ok"}}}
	want.Checks[1].ProtoReflect().SetUnknown(unknownField())
	if !proto.Equal(&got, want) {
		t.Errorf("decoded %v, want %v", &got, want)
	}
}

// unknownField is a field no sluice.v1 message has.
func unknownField() []byte {
	b := protowire.AppendTag(nil, 42, protowire.VarintType)
	return protowire.AppendVarint(b, 7)
}

// BenchmarkServerCodecUnmarshal decodes requests through gRPC's protobuf
// codec and through the node's server codec: on valid requests the second
// costs nothing more; a request refused for its UTF-8 is decoded a second
// time, as if its strings were bytes.
func BenchmarkServerCodecUnmarshal(b *testing.B) {
	pb := newPeerCodec().proto
	server := newServerCodec()
	server.lenient.accept(&sluicev1.CheckRequest{}, &sluicev1.CheckBatchRequest{})
	cases := decodeCases()
	for _, bc := range []struct {
		name  string
		codec interface {
			Unmarshal(mem.BufferSlice, any) error
		}
		req    []byte
		newMsg func() any
	}{
		{"check/proto", pb, cases["check"], func() any { return &sluicev1.CheckRequest{} }},
		{"check/server", server, cases["check"], func() any { return &sluicev1.CheckRequest{} }},
		{"batch-1000/proto", pb, cases["batch of 1000"], func() any { return &sluicev1.CheckBatchRequest{} }},
		{"batch-1000/server", server, cases["batch of 1000"], func() any { return &sluicev1.CheckBatchRequest{} }},
		{"check-not-utf8/server", server, wireCheck("api", "user:\xff", 1), func() any { return &sluicev1.CheckRequest{} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data := mem.BufferSlice{mem.SliceBuffer(bc.req)}
			if err := bc.codec.Unmarshal(data, bc.newMsg()); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				bc.codec.Unmarshal(data, bc.newMsg())
			}
		})
	}
}

// TestLenientCopiesEveryKindOfField reads google.protobuf.Struct, whose
// fields are a map of string keys to messages, a oneof, a list of
// messages, an enum, a double, a bool and strings, and
// google.protobuf.FileDescriptorProto (proto2: repeated strings, nested
// messages, enums, explicit presence) leniently: valid, each reads as
// protobuf reads it; with a string value that is not UTF-8, it holds the
// bytes sent; with a map key that is not UTF-8, which stays a string, it
// is refused as protobuf refuses it.
func TestLenientCopiesEveryKindOfField(t *testing.T) {
	l := newLenientUTF8()
	l.accept(&structpb.Struct{}, &descriptorpb.FileDescriptorProto{})
	list, err := structpb.NewList([]any{"a", 1.5, true, nil, map[string]any{"deep": []any{"x", "é"}}})
	if err != nil {
		t.Fatal(err)
	}
	valid := &structpb.Struct{Fields: map[string]*structpb.Value{
		"s": structpb.NewStringValue("text"), "n": structpb.NewNumberValue(-2), "b": structpb.NewBoolValue(false),
		"null": structpb.NewNullValue(), "list": structpb.NewListValue(list), "": structpb.NewStringValue(""),
	}}
	file := protodesc.ToFileDescriptorProto(sluicev1.File_sluice_v1_limiter_proto)
	for _, m := range []proto.Message{valid, file} {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := m.ProtoReflect().New().Interface()
		if ok, err := l.unmarshal(b, got); !ok || err != nil || !proto.Equal(got, m) {
			t.Errorf("%T read leniently: %v (%v, %v), want %v", m, got, ok, err, m)
		}
	}

	// {"k": "v\xff"} and {"k\xff": "v"}, by hand: protobuf-go writes
	// neither.
	entry := func(key, value string) []byte {
		v := protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), value) // Value.string_value
		e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), key)
		e = protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), v)
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), e) // Struct.fields
	}
	var got structpb.Struct
	if ok, err := l.unmarshal(entry("k", "v\xff"), &got); !ok || err != nil || got.GetFields()["k"].GetStringValue() != "v\xff" {
		t.Errorf("a string value that is not UTF-8: %v (%v, %v)", &got, ok, err)
	}
	// (protobuf-go reads a dynamic message by reflection, whose error
	// says so in words only.)
	if ok, err := l.unmarshal(entry("k\xff", "v"), &got); !ok || err == nil || !strings.Contains(err.Error(), "invalid UTF-8") {
		t.Errorf("a map key that is not UTF-8: %v, %v; want protobuf's refusal", ok, err)
	}
	if ok, _ := l.unmarshal(entry("k", "v\xff"), &sluicev1.RulesResponse{}); ok {
		t.Errorf("a type not accepted was read leniently")
	}
}
