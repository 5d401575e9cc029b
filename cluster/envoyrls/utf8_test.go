package envoyrls

import (
	"context"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// rawCodec sends a request's bytes as they are, as Envoy, whose C++
// protobuf sends a header value that is not UTF-8 in a string field, may;
// it decodes answers as protobuf.
type rawCodec struct{}

// rawRequest is a request already on the wire.
type rawRequest []byte

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawRequest))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// wireString appends field num holding s, as it is.
func wireString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// wireDesc is an envoy.extensions.common.ratelimit.v3.RateLimitDescriptor
// written by hand: its entries, key then value, and with hits > 0 its
// hits_addend.
func wireDesc(hits uint64, kv ...string) []byte {
	var d []byte
	for i := 0; i+1 < len(kv); i += 2 {
		d = protowire.AppendTag(d, 1, protowire.BytesType)
		d = protowire.AppendBytes(d, wireString(wireString(nil, 1, kv[i]), 2, kv[i+1]))
	}
	if hits > 0 {
		addend := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), hits) // UInt64Value
		d = protowire.AppendBytes(protowire.AppendTag(d, 3, protowire.BytesType), addend)
	}
	return d
}

// wireRLS is an envoy.service.ratelimit.v3.RateLimitRequest written by
// hand: the domain, the descriptors, and with hits > 0 its hits_addend.
func wireRLS(domain string, hits uint64, descriptors ...[]byte) []byte {
	b := wireString(nil, 1, domain)
	for _, d := range descriptors {
		b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), d)
	}
	if hits > 0 {
		b = protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), hits)
	}
	return b
}

// TestShouldRateLimitNotUTF8 sends the node, over its gRPC port, requests
// whose descriptor entries are not UTF-8, as Envoy sends a header's bytes:
// each is decided, not failed (which Envoy would answer by its
// failure_mode_deny, by default admitting the request with none of its
// limits counted). A value is counted under its own key, made UTF-8; a key
// or domain that is not UTF-8 matches no limit.
func TestShouldRateLimitNotUTF8(t *testing.T) {
	fx := startRLS(t, serverConfig, Options{})
	conn, err := grpc.NewClient(fx.node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func(req []byte) *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := rawRequest(req)
		var resp rlsv3.RateLimitResponse
		if err := conn.Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, &r, &resp,
			grpc.ForceCodecV2(rawCodec{})); err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return &resp
	}
	// remote_address: 3 a second, each address apart.
	bad := []string{"remote_address", "1.2.3.\xff"}
	for i, want := range []rlsv3.RateLimitResponse_Code{ok, ok, ok, over} {
		if got := ask(wireRLS("edge", 0, wireDesc(0, bad...))).GetOverallCode(); got != want {
			t.Fatalf("request %d from an address that is not UTF-8: %v, want %v", i+1, got, want)
		}
	}
	// Another such value counts apart, and so does one beside it in a
	// request that another descriptor refuses: all or nothing.
	if got := ask(wireRLS("edge", 0, wireDesc(0, "remote_address", "1.2.3.\xfe"))).GetOverallCode(); got != ok {
		t.Errorf("another address: %v, want OK", got)
	}
	resp := ask(wireRLS("edge", 0, wireDesc(0, "remote_address", "9.9.9.\xfe"), wireDesc(0, bad...)))
	if resp.GetOverallCode() != over || resp.GetStatuses()[0].GetCode() != ok || resp.GetStatuses()[1].GetCode() != over {
		t.Errorf("beside a refused descriptor: %v", resp)
	}
	key := checkKey(desc(bad...).GetEntries(), []*tree{{}})
	if own, _, err := fx.node.View("edge.remote_address", key); err != nil || own.Curr != 3 {
		t.Errorf("counted %+v under %q (%v), want 3", own, key, err)
	}
	// Hits, the request's hits_addend (a scalar) and a descriptor's (a
	// message), read from a request that is not UTF-8 as from any.
	for _, tt := range []struct {
		name string
		req  []byte
	}{
		{"3 hits, the request's", wireRLS("edge", 3, wireDesc(0, "remote_address", "5.5.5.\xff"))},
		{"2 hits, the descriptor's", wireRLS("edge", 0, wireDesc(2, "remote_address", "6.6.6.\xff"))},
	} {
		for i, want := range []rlsv3.RateLimitResponse_Code{ok, over} {
			if got := ask(tt.req).GetOverallCode(); got != want {
				t.Errorf("%s, request %d: %v, want %v", tt.name, i+1, got, want)
			}
		}
	}
	// No limit has such a key, or such a domain: OK, nothing counted.
	for _, req := range [][]byte{
		wireRLS("edge", 0, wireDesc(0, "remote_\xffaddress", "1.2.3.4")),
		wireRLS("ed\xffge", 0, wireDesc(0, bad...)),
	} {
		if resp := ask(req); resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetCurrentLimit() != nil {
			t.Errorf("%q: %v, want OK with no limit", req, resp)
		}
	}
}
