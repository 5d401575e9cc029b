package cluster

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/window"
)

// echoServer answers the test service with the name of the node it was
// registered for.
type echoServer interface{ name() string }

type echoImpl struct{ n *Node }

func (e echoImpl) name() string { return e.n.Name() }

// echoDesc is a one-method service, sluice.test.Echo/Name, registered the
// way an embedder's generated code would.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "sluice.test.Echo",
	HandlerType: (*echoServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Name",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return wrapperspb.String(in.GetValue() + srv.(echoServer).name()), nil
		},
	}},
}

// Config.GRPCServices register services on the node's port, beside its
// own, with the node they serve.
func TestGRPCServices(t *testing.T) {
	calls := 0
	node, err := Start(context.Background(), Config{Name: "svc-node", Rules: []window.Rule{svcFixed}, GRPCAddr: "127.0.0.1:0",
		GRPCServices: []func(grpc.ServiceRegistrar, *Node){func(s grpc.ServiceRegistrar, n *Node) {
			calls++
			s.RegisterService(&echoDesc, echoImpl{n})
		}}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if calls != 1 {
		t.Fatalf("registration called %d times, want 1", calls)
	}
	conn, err := grpc.NewClient(node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, "/sluice.test.Echo/Name", wrapperspb.String("node: "), out); err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if out.GetValue() != "node: svc-node" {
		t.Errorf("got %q, want %q", out.GetValue(), "node: svc-node")
	}
	// The node's own services still answer beside it.
	if _, err := node.Allow(ctx, svcFixed.Name, "k", 1); err != nil {
		t.Errorf("Allow: %v", err)
	}
}
