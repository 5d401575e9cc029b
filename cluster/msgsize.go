package cluster

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sizeCounted returns desc with its handlers wrapped so that a message
// gRPC refuses for its size (larger than MaxMessageSize, or so once
// decompressed), which it answers with ResourceExhausted before any
// handler, interceptor or codec sees it, is counted in
// Metrics.RefusedMessageSize. gRPC reads a request for a handler, as the
// handler asks: the wrappers see what it says.
func (n *Node) sizeCounted(desc *grpc.ServiceDesc) *grpc.ServiceDesc {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return n.countSize(dec(v)) }, ic)
		}
		d.Methods[i] = m
	}
	d.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, s := range desc.Streams {
		h := s.Handler
		s.Handler = func(srv any, ss grpc.ServerStream) error { return h(srv, sizeCountedStream{ss, n}) }
		d.Streams[i] = s
	}
	return &d
}

// countSize counts err if it is gRPC's refusal of a message for its size:
// the only ResourceExhausted reading a message can fail with.
func (n *Node) countSize(err error) error {
	if err != nil && status.Code(err) == codes.ResourceExhausted {
		n.metrics.RefusedMessageSize.Add(1)
	}
	return err
}

// sizeCountedStream is a stream whose messages in are counted as
// sizeCounted says.
type sizeCountedStream struct {
	grpc.ServerStream
	n *Node
}

func (s sizeCountedStream) RecvMsg(m any) error { return s.n.countSize(s.ServerStream.RecvMsg(m)) }
