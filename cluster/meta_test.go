package cluster

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// FuzzDecodeMeta checks that decodeMeta, which reads the metadata peers
// gossip, never panics, and that what it accepts from at most maxMetaSize
// bytes (memberlist's limit) encodes again and decodes to the same metadata.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []nodeMeta{
		{grpcAddr: "127.0.0.1:7946", boot: 1, rulesHash: 2},
		{grpcAddr: "node-1.example:9000", boot: math.MaxUint64, rulesHash: math.MaxUint64, raftAddr: "[::1]:7000"},
	} {
		b, err := m.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, m := range []*sluicev1.NodeMeta{
		{},
		{GrpcAddr: "no-port"},
		{GrpcAddr: "h:1", RaftAddr: "h:99999"},
		{GrpcAddr: strings.Repeat("h", 600) + ":1"},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x05, 'h', ':', '1'})
	f.Add([]byte{0xff, 0xff})

	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMeta(data)
		if err != nil {
			if m != (nodeMeta{}) {
				t.Fatalf("decodeMeta returned %+v with error %v", m, err)
			}
			return
		}
		if m.grpcAddr == "" {
			t.Fatal("accepted metadata has no gRPC address")
		}
		b, err := m.encode()
		if err != nil {
			if len(data) <= maxMetaSize {
				t.Fatalf("metadata decoded from %d bytes does not encode: %v", len(data), err)
			}
			return
		}
		again, err := decodeMeta(b)
		if err != nil {
			t.Fatalf("accepted metadata %+v does not decode after encode: %v", m, err)
		}
		if again != m {
			t.Fatalf("decode(encode(decode(data))) = %+v, want %+v", again, m)
		}
	})
}
