package bench

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/cluster"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// checkFuncs returns one check function per node for c's transport, and a
// function that releases what they hold.
func checkFuncs(ctx context.Context, cl *Cluster, c *ThroughputConfig) ([]checkFunc, func(), error) {
	if c.Transport == TransportRedisLua {
		check, closeAll, err := redisChecks(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		return []checkFunc{check}, closeAll, nil
	}
	out := make([]checkFunc, len(cl.Nodes))
	if c.Transport == TransportEmbedded {
		for i, nd := range cl.Nodes {
			out[i] = func(ctx context.Context, keys []string, hits int64, ds []cluster.Decision) error {
				for j, key := range keys {
					d, err := nd.Allow(ctx, throughputRule, key, hits)
					if err != nil {
						return err
					}
					ds[j] = d
				}
				return nil
			}
		}
		return out, func() {}, nil
	}
	addrs := c.Targets
	if len(addrs) == 0 {
		for _, nd := range cl.Nodes {
			addrs = append(addrs, nd.GRPCAddr())
		}
	}
	out = make([]checkFunc, len(addrs))
	conns := make([]*grpc.ClientConn, 0, len(addrs))
	closeAll := func() {
		for _, cc := range conns {
			cc.Close()
		}
	}
	rule := c.ruleName()
	for i, addr := range addrs {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("grpc client for %s: %w", addr, err)
		}
		conns = append(conns, cc)
		switch c.Transport {
		case TransportGRPC:
			out[i] = grpcCheck(sluicev1.NewLimiterClient(cc), rule)
		case TransportGRPCBatch:
			out[i] = grpcBatchCheck(cc, rule)
		case TransportGRPCNoop:
			out[i] = noopCheck(cc)
		}
	}
	return out, closeAll, nil
}

// grpcCheck calls Limiter.Check for one key under rule.
func grpcCheck(client sluicev1.LimiterClient, rule string) checkFunc {
	return func(ctx context.Context, keys []string, hits int64, ds []cluster.Decision) error {
		resp, err := client.Check(ctx, &sluicev1.CheckRequest{Rule: rule, Key: keys[0], Hits: hits})
		if err != nil {
			return err
		}
		ds[0] = decisionOf(resp)
		return nil
	}
}

// grpcBatchCheck calls Limiter.CheckBatch for every key at once. It reads
// the answer's results as batchAnswer does, not as a CheckBatchResponse:
// the client runs in the measured process, and building a hundred messages
// a call would weigh on the figure as much as the server does.
func grpcBatchCheck(cc *grpc.ClientConn, rule string) checkFunc {
	return func(ctx context.Context, keys []string, hits int64, ds []cluster.Decision) error {
		// One allocation for the checks, not one each.
		checks := make([]sluicev1.CheckRequest, len(keys))
		req := &sluicev1.CheckBatchRequest{Checks: make([]*sluicev1.CheckRequest, len(keys))}
		for i, key := range keys {
			checks[i].Rule, checks[i].Key, checks[i].Hits = rule, key, hits
			req.Checks[i] = &checks[i]
		}
		ans := batchAnswer{ds: ds}
		if err := cc.Invoke(ctx, sluicev1.Limiter_CheckBatch_FullMethodName, req, &ans, grpc.ForceCodecV2(benchCodec{})); err != nil {
			return err
		}
		if ans.n != len(keys) {
			return fmt.Errorf("CheckBatch of %d checks answered %d results", len(keys), ans.n)
		}
		return nil
	}
}

// batchAnswer is a CheckBatchResponse as the bench reads it: each result's
// allowed and remaining, into ds, and how many results there were.
type batchAnswer struct {
	ds []cluster.Decision
	n  int
}

// benchCodec is the proto codec, but for a batchAnswer, which it reads off
// the wire itself.
type benchCodec struct{}

func (benchCodec) Name() string { return "proto" }

func (benchCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (benchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	a, ok := v.(*batchAnswer)
	if !ok {
		return encoding.GetCodecV2("proto").Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return a.parse(buf.ReadOnlyData())
}

// parse reads a CheckBatchResponse's results (field 1), and of each its
// allowed (1) and remaining (3).
func (a *batchAnswer) parse(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		r, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var d cluster.Decision
		for len(r) > 0 {
			num, typ, n := protowire.ConsumeTag(r)
			if n < 0 {
				return protowire.ParseError(n)
			}
			r = r[n:]
			if (num == 1 || num == 3) && typ == protowire.VarintType {
				v, n := protowire.ConsumeVarint(r)
				if n < 0 {
					return protowire.ParseError(n)
				}
				r = r[n:]
				if num == 1 {
					d.Allowed = v != 0
				} else {
					d.Remaining = int64(v)
				}
				continue
			}
			n = protowire.ConsumeFieldValue(num, typ, r)
			if n < 0 {
				return protowire.ParseError(n)
			}
			r = r[n:]
		}
		if a.n < len(a.ds) {
			d.Path = pathUnknown
			a.ds[a.n] = d
		}
		a.n++
	}
	return nil
}

// decisionOf is the decision a Check answer carries; it does not say which
// path made it.
func decisionOf(r *sluicev1.CheckResponse) cluster.Decision {
	return cluster.Decision{Allowed: r.GetAllowed(), Limit: r.GetLimit(), Remaining: r.GetRemaining(),
		ResetAfter: r.GetResetAfter().AsDuration(), RetryAfter: r.GetRetryAfter().AsDuration(), Path: pathUnknown}
}

// noopMethod is the no-op reference's one method: Check's request and
// response, on a service of its own beside the node's Limiter.
const noopMethod = "/sluice.bench.Noop/Check"

// noopDesc describes the no-op reference service, which the bench
// registers on each node's own gRPC server (cluster.Config.GRPCServices):
// the same listener, options and codec as Limiter.Check, and a handler that
// reads the request and answers an empty decision.
var noopDesc = grpc.ServiceDesc{
	ServiceName: "sluice.bench.Noop",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Check",
		Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(sluicev1.CheckRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			noop := func(context.Context, any) (any, error) { return &sluicev1.CheckResponse{}, nil }
			if interceptor == nil {
				return noop(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: noopMethod}, noop)
		},
	}},
}

// registerNoop registers the no-op reference on a node's server.
func registerNoop(s grpc.ServiceRegistrar, _ *cluster.Node) { s.RegisterService(&noopDesc, struct{}{}) }

// noopCheck calls the no-op reference for one key.
func noopCheck(cc *grpc.ClientConn) checkFunc {
	return func(ctx context.Context, keys []string, hits int64, ds []cluster.Decision) error {
		resp := new(sluicev1.CheckResponse)
		if err := cc.Invoke(ctx, noopMethod, &sluicev1.CheckRequest{Rule: throughputRule, Key: keys[0], Hits: hits}, resp); err != nil {
			return err
		}
		ds[0] = decisionOf(resp)
		return nil
	}
}
