package cluster

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// server is the node's gRPC server: Limiter for clients, Peer for the
// cluster (and Strict, which strict mode registers), health and reflection
// for operators, and what Config.GRPCServices adds, all on one port.
type server struct {
	grpc *grpc.Server
	// reg registers services on grpc, counting the messages it refuses
	// for their size (Node.sizeCounted).
	reg    *registrar
	health *health.Server
	lis    net.Listener
	served chan struct{}
	// serving is set by serve, before any handler runs; stop reads it
	// after every handler has ended.
	serving bool
}

func newServer(ctx context.Context, n *Node) (*server, error) {
	lis, err := n.listen(ctx, n.cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("sluice: grpc_addr: %w", err)
	}
	codec := newServerCodec()
	opts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageSize), grpc.ForceServerCodecV2(codec)},
		n.serverOptions()...)
	s := &server{
		grpc:   grpc.NewServer(opts...),
		health: health.NewServer(),
		lis:    lis,
		served: make(chan struct{}),
	}
	reg := &registrar{Server: s.grpc, lenient: codec.lenient, n: n}
	s.reg = reg
	sluicev1.RegisterLimiterServer(reg, NewLimiterService(n))
	// Limiter's handlers check that a rule and key are UTF-8 (Node.Check,
	// Node.Allow), and answer InvalidArgument naming the field.
	codec.lenient.accept(&sluicev1.CheckRequest{}, &sluicev1.CheckBatchRequest{})
	sluicev1.RegisterPeerServer(reg, &peerService{node: n})
	for _, register := range n.cfg.GRPCServices {
		register(reg, n)
	}
	healthpb.RegisterHealthServer(reg, s.health)
	reflection.Register(reg)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(sluicev1.Limiter_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s, nil
}

// serve starts answering calls. The node calls it once the fields its
// handlers read are set: a handler must never see a half-started node.
func (s *server) serve(log interface{ Error(string, ...any) }) {
	s.serving = true
	go func() {
		defer close(s.served)
		if err := s.grpc.Serve(s.lis); err != nil {
			log.Error("gRPC server stopped", "err", err)
		}
	}()
}

// MaxMessageSize bounds one gRPC message the node takes, of any service it
// serves, a peer's sync delta included: gRPC refuses a larger one with
// ResourceExhausted before any handler reads it.
const MaxMessageSize = 16 << 20

func (s *server) addr() string { return s.lis.Addr().String() }

// stop drains in-flight calls for up to timeout, then cuts the rest.
func (s *server) stop(timeout time.Duration) {
	s.health.Shutdown()
	drained := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(timeout):
		s.grpc.Stop()
		<-drained
	}
	if !s.serving {
		s.lis.Close()
		return
	}
	<-s.served
}
