package cluster

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
)

// WireSize returns the size in bytes of d encoded as a sync message, for
// measuring sync traffic.
func WireSize(d *counter.Delta) int { return wire.DeltaSize(d, 0) }

// rawDelta is a delta already in its wire form: the Sync stream sends and
// receives it as is, through peerCodec, with no protobuf message between.
type rawDelta struct{ b []byte }

// peerCodec is gRPC's protobuf codec but for rawDelta, whose bytes it
// passes through: a Sync stream's messages are sluice.v1.Delta on the
// wire, written and read by wire.AppendDelta and wire.ParseDelta. Its name is that of
// the protobuf codec, so peers that marshal sluice.v1.Delta themselves
// understand it.
//
// The server's codec also decodes the request types lenient accepts when
// protobuf-go refuses one for a string that is not UTF-8 (see
// AcceptInvalidUTF8); a client's has no lenient.
type peerCodec struct {
	proto   encoding.CodecV2
	lenient *lenientUTF8
}

func newPeerCodec() peerCodec { return peerCodec{proto: encoding.GetCodecV2(protoCodecName)} }

// newServerCodec is the codec of a node's server.
func newServerCodec() peerCodec {
	c := newPeerCodec()
	c.lenient = newLenientUTF8()
	return c
}

// protoCodecName is the name gRPC's protobuf codec registers under.
const protoCodecName = "proto"

func (c peerCodec) Name() string { return protoCodecName }

func (c peerCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*rawDelta); ok {
		return mem.BufferSlice{mem.SliceBuffer(r.b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c peerCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawDelta); ok {
		// data is freed once this returns: the delta keeps a copy.
		r.b = data.Materialize()
		return nil
	}
	err := c.proto.Unmarshal(data, v)
	if err == nil || c.lenient == nil || !invalidUTF8(err) {
		return err
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	switch ok, lerr := c.lenient.unmarshal(data.Materialize(), m); {
	case !ok:
		return err
	case lerr != nil:
		return fmt.Errorf("%w (read with bytes for strings: %w)", err, lerr)
	}
	return nil
}
