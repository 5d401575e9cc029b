package middleware

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/cluster"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// GRPCKeyFunc returns the key a gRPC call is counted under, and false when
// the call has none (see RefuseMissingKey). fullMethod is the call's
// "/package.Service/Method", for a key per method.
type GRPCKeyFunc func(ctx context.Context, fullMethod string) (key string, ok bool)

// UnaryServerInterceptor returns an interceptor that checks each unary
// call, under the key that key finds, against l before its handler runs.
// An admitted call goes on with ratelimit and ratelimit-policy in its
// header metadata; a refused one ends with codes.ResourceExhausted, a
// message naming the wait, a google.rpc.RetryInfo detail with the exact
// wait, and retry-after (whole seconds, rounded up) in its header and
// trailer metadata beside those two. A call with no key, or whose check
// fails, goes on unchecked unless RefuseMissingKey (codes.InvalidArgument)
// or FailClosed (codes.Unavailable) says otherwise.
//
// key is required, as for HTTP; a nil key or l panics.
func UnaryServerInterceptor(l Limiter, key GRPCKeyFunc, opts ...Option) grpc.UnaryServerInterceptor {
	if key == nil {
		panic("middleware: UnaryServerInterceptor: nil GRPCKeyFunc")
	}
	c := newCore(l, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		k, ok := key(ctx, info.FullMethod)
		e := c.check(ctx, k, ok)
		header, trailer, err := c.grpcVerdict(&e)
		// Setting metadata fails only outside a server's stream (a test
		// calling the interceptor itself): the verdict stands.
		if header != nil {
			_ = grpc.SetHeader(ctx, header)
		}
		if trailer != nil {
			_ = grpc.SetTrailer(ctx, trailer)
		}
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: each
// stream is checked once, when it opens, and a refused stream ends before
// its handler runs.
func StreamServerInterceptor(l Limiter, key GRPCKeyFunc, opts ...Option) grpc.StreamServerInterceptor {
	if key == nil {
		panic("middleware: StreamServerInterceptor: nil GRPCKeyFunc")
	}
	c := newCore(l, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		k, ok := key(ctx, info.FullMethod)
		e := c.check(ctx, k, ok)
		header, trailer, err := c.grpcVerdict(&e)
		if header != nil {
			_ = ss.SetHeader(header)
		}
		if trailer != nil {
			ss.SetTrailer(trailer)
		}
		if err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// grpcVerdict returns what a call that ended in e is sent: header and
// trailer metadata (nil for none), and the status ending it, nil when it
// goes on.
func (c *core) grpcVerdict(e *Event) (header, trailer metadata.MD, err error) {
	switch e.Outcome {
	case Admitted:
		return c.grpcFields(&e.Decision, ""), nil, nil
	case Refused:
		secs := strconv.FormatInt(retrySeconds(e.Decision.RetryAfter), 10)
		return c.grpcFields(&e.Decision, secs), metadata.MD{mdRetryAfter: {secs}}, c.refusalStatus(&e.Decision, secs)
	case NoKeyRefused:
		return nil, nil, status.Error(codes.InvalidArgument, "sluice: no rate limit key in the call")
	case FailedClosed:
		return nil, nil, status.Error(codes.Unavailable, "sluice: rate limiter unavailable")
	}
	return nil, nil, nil
}

// grpcFields is the header metadata of a decided call: the RateLimit
// fields, and retry-after when retry is not "".
func (c *core) grpcFields(d *cluster.Decision, retry string) metadata.MD {
	md := metadata.MD{
		mdRateLimit:       {c.rateLimitValue(d)},
		mdRateLimitPolicy: {c.policyValue(d)},
	}
	if retry != "" {
		md[mdRetryAfter] = []string{retry}
	}
	return md
}

// refusalStatus is the error a refused call ends with. Its RetryInfo
// carries the exact wait, which the whole seconds of retry-after round up.
func (c *core) refusalStatus(d *cluster.Decision, secs string) error {
	st := status.New(codes.ResourceExhausted,
		fmt.Sprintf("sluice: rate limit %q exceeded, retry in %s s", c.l.Name(), secs))
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}); err == nil {
		st = withInfo
	}
	return st.Err()
}
