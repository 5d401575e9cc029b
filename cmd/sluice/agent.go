package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/sluicehq/sluice/cluster"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// defaultConfig holds the rules the agent enforces without --config.
//
//go:embed default.yaml
var defaultConfig []byte

// defaultConfigName names the embedded config in messages.
const defaultConfigName = "default.yaml (built in)"

// defaultGRPCAddr is where the agent serves, and check calls, by default.
const defaultGRPCAddr = "127.0.0.1:7070"

const agentUsage = `usage: sluice agent [--config FILE] [flags]

Runs one sluice node: it enforces the rules in FILE (or, without --config,
built-in rules: api, 10 per 10s sliding; burst, 100 per 60s fixed) and
serves the sluice.v1.Limiter gRPC API, gRPC health and reflection on
--grpc-addr until interrupted (Ctrl-C or SIGTERM), then drains in-flight
calls and stops. Flags override the file.

Exit status: 2 if the config is invalid or the node cannot start.

flags:
`

// agentOptions is how to run an agent: the config file merged with the
// command line.
type agentOptions struct {
	// file holds the node settings and rules; flags are already applied.
	file *cluster.FileConfig
	// shutdownTimeout bounds the graceful drain of gRPC calls at stop.
	shutdownTimeout time.Duration
	// logger receives the agent's and the node's logs.
	logger *slog.Logger
	// now is the node's clock (Unix nanoseconds); nil is the wall clock.
	// Tests set it.
	now func() int64
}

// runAgent runs `sluice agent`.
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return agentMain(ctx, args, stdout, stderr, nil)
}

// agentMain is runAgent; ready, when not nil, is called with the bound gRPC
// address once the agent serves.
func agentMain(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(addr string)) error {
	opts, err := parseAgentFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	log := opts.logger
	f := opts.file
	if f.GossipAddr != "" || f.AdvertiseAddr != "" || len(f.Join) > 0 || f.HTTPAddr != "" {
		log.Warn("gossip, join and http settings are accepted but not used yet: this agent runs a single node",
			"gossip_addr", f.GossipAddr, "advertise_addr", f.AdvertiseAddr, "join", f.Join, "http_addr", f.HTTPAddr)
	}
	a, err := startAgent(ctx, opts)
	if err != nil {
		return err
	}
	log.Info("sluice agent serving", "grpc_addr", a.Addr(), "node", a.node.Name(), "config", f.Path)
	for _, r := range a.node.Rules() {
		attrs := []any{"rule", r.Name, "count", r.Count, "time_window", r.Window, "window_type", r.Type}
		if r.IsStrict() {
			attrs = append(attrs, "sync_interval", "strict", "fail_mode", r.FailMode)
		} else {
			attrs = append(attrs, "sync_interval", r.SyncInterval, "allocation", r.Allocation)
		}
		log.Info("rule", attrs...)
	}
	if ready != nil {
		ready(a.Addr())
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case <-a.Done():
		log.Error("gRPC server stopped serving", "err", a.Err())
	}
	if err := a.Stop(opts.shutdownTimeout); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// parseAgentFlags reads the command line and the config file it names.
func parseAgentFlags(args []string, stdout, stderr io.Writer) (*agentOptions, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), agentUsage)
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "read node settings and rules from this YAML `FILE` (see examples/sluice.yaml)")
	name := fs.String("name", "", "node name, stable across restarts (default: the file's name, else the host name)")
	grpcAddr := fs.String("grpc-addr", defaultGRPCAddr, "serve the gRPC API on `HOST:PORT`; port 0 picks a free port")
	gossipAddr := fs.String("gossip-addr", "", "gossip (memberlist) `HOST:PORT`; not used yet")
	advertiseAddr := fs.String("advertise-addr", "", "gossip `HOST:PORT` peers reach this node on; not used yet")
	var join addrList
	fs.Var(&join, "join", "gossip addresses of peers to join, `HOST:PORT[,...]`; repeatable; not used yet")
	httpAddr := fs.String("http-addr", "", "serve /metrics and /healthz on `HOST:PORT`; not used yet")
	dataDir := fs.String("data-dir", "", "keep state in this `DIR` across restarts (default: in memory)")
	shutdown := fs.Duration("shutdown-timeout", 10*time.Second, "on stop, wait this long for in-flight calls")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "log `LEVEL`: debug, info, warn or error")
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	set := setFlags(fs)

	var file *cluster.FileConfig
	var err error
	if *configPath != "" {
		file, err = cluster.LoadConfigFile(*configPath)
	} else {
		file, err = cluster.ParseConfigFile(defaultConfigName, defaultConfig)
	}
	if err != nil {
		return nil, err
	}
	override := func(flagName string, dst *string, v string) {
		if set[flagName] || *dst == "" {
			*dst = v
		}
	}
	override("name", &file.Name, *name)
	override("grpc-addr", &file.GRPCAddr, *grpcAddr)
	override("gossip-addr", &file.GossipAddr, *gossipAddr)
	override("advertise-addr", &file.AdvertiseAddr, *advertiseAddr)
	override("http-addr", &file.HTTPAddr, *httpAddr)
	override("data-dir", &file.DataDir, *dataDir)
	if set["join"] {
		file.Join = join
	}
	for _, a := range []struct{ flag, value string }{
		{"grpc-addr", file.GRPCAddr}, {"gossip-addr", file.GossipAddr},
		{"advertise-addr", file.AdvertiseAddr}, {"http-addr", file.HTTPAddr},
	} {
		if set[a.flag] && a.value != "" {
			if err := cluster.CheckHostPort("--"+a.flag, a.value); err != nil {
				return nil, usageError{err}
			}
		}
	}
	if *shutdown < 0 {
		return nil, usageError{fmt.Errorf("--shutdown-timeout must not be negative, got %v", *shutdown)}
	}
	return &agentOptions{
		file:            file,
		shutdownTimeout: *shutdown,
		logger:          slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}, nil
}

// addrList is a flag holding HOST:PORT addresses, comma-separated and
// repeatable.
type addrList []string

func (l *addrList) String() string { return strings.Join(*l, ",") }

// Set adds the comma-separated addresses in s.
func (l *addrList) Set(s string) error {
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if err := cluster.CheckHostPort("address", a); err != nil {
			return err
		}
		*l = append(*l, a)
	}
	return nil
}

// agent is a running node serving gRPC.
type agent struct {
	node   *cluster.Node
	srv    *grpc.Server
	health *health.Server
	lis    net.Listener

	served   chan struct{} // closed when Serve returns
	serveErr error         // what Serve returned; read after served

	stopOnce sync.Once
	stopErr  error
}

// startAgent starts a node with opts' rules and serves it over gRPC on the
// configured address. The agent runs until Stop.
func startAgent(ctx context.Context, opts *agentOptions) (*agent, error) {
	rules, err := opts.file.NodeRules()
	if err != nil {
		return nil, err
	}
	logger := opts.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	node, err := cluster.Start(ctx, cluster.Config{
		Name: opts.file.Name, Rules: rules, DataDir: opts.file.DataDir, Logger: logger, Now: opts.now,
	})
	if err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	addr := opts.file.GRPCAddr
	if addr == "" {
		addr = defaultGRPCAddr
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("grpc_addr: %w", err), node.Close())
	}
	a := &agent{
		node: node, lis: lis, srv: grpc.NewServer(), health: health.NewServer(),
		served: make(chan struct{}),
	}
	sluicev1.RegisterLimiterServer(a.srv, cluster.NewLimiterService(node))
	healthpb.RegisterHealthServer(a.srv, a.health)
	reflection.Register(a.srv)
	a.health.SetServingStatus(sluicev1.Limiter_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	go func() {
		defer close(a.served)
		a.serveErr = a.srv.Serve(lis)
	}()
	return a, nil
}

// Addr returns the address the gRPC API is served on, with the port the
// system picked when the config said 0.
func (a *agent) Addr() string { return a.lis.Addr().String() }

// Done is closed when the gRPC server stops serving.
func (a *agent) Done() <-chan struct{} { return a.served }

// Err returns why the gRPC server stopped serving, once Done is closed.
func (a *agent) Err() error {
	<-a.served
	return a.serveErr
}

// Stop drains in-flight calls for at most timeout, then cuts the rest off,
// and closes the node. It is safe to call more than once.
func (a *agent) Stop(timeout time.Duration) error {
	a.stopOnce.Do(func() {
		a.health.Shutdown()
		drained := make(chan struct{})
		go func() {
			a.srv.GracefulStop()
			close(drained)
		}()
		timer := time.NewTimer(timeout)
		select {
		case <-drained:
		case <-timer.C:
			a.srv.Stop()
			<-drained
		}
		timer.Stop()
		<-a.served
		var serveErr error
		if a.serveErr != nil && !errors.Is(a.serveErr, grpc.ErrServerStopped) {
			serveErr = fmt.Errorf("serve: %w", a.serveErr)
		}
		a.stopErr = errors.Join(serveErr, a.node.Close())
	})
	return a.stopErr
}
