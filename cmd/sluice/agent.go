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
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/configfile"
	"github.com/sluicehq/sluice/cluster/envoyrls"
	"github.com/sluicehq/sluice/cluster/prom"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// defaultConfig holds the rules the agent enforces without --config.
//
//go:embed default.yaml
var defaultConfig []byte

// defaultConfigName names the embedded config in messages.
const defaultConfigName = "default.yaml (built in)"

// defaultGRPCAddr is where the agent serves, and check calls, by default.
const defaultGRPCAddr = "127.0.0.1:7070"

const agentUsage = `usage: sluice agent [--config FILE] [--envoy-config FILE…] [flags]

Runs one sluice node: it enforces the rules in FILE (or, without --config,
built-in rules: api, 10 per 10s sliding; burst, 100 per 60s fixed) and
serves the sluice.v1.Limiter and sluice.v1.Peer gRPC APIs, gRPC health and
reflection on --grpc-addr until interrupted (Ctrl-C or SIGTERM); then it
leaves the cluster, drains in-flight calls and stops. Flags override the
file.

Clustering: a node with --gossip-addr gossips (memberlist) on that address
and joins the peers given by --join: their gossip addresses, HOST:PORT, or
dns:NAME:PORT for every address NAME resolves to (a Kubernetes headless
service). Nodes learn each other's gRPC addresses by gossip and exchange
counts over gRPC; a joining node pulls the current counts from a peer
before it serves. Start the first node without --join and the others with
--join pointing at it; give every node a unique --name and the same rules.
examples/cluster/README.md runs 3 agents on one machine, and
'sluice members --addr HOST:PORT' lists the cluster as a node sees it.

Envoy: each --envoy-config FILE is an envoyproxy/ratelimit config file, one
domain per file; the agent then also serves Envoy's rate limit service
(envoy.service.ratelimit.v3.RateLimitService) on --grpc-addr, and its limits
become rules beside those of --config. examples/envoy/README.md shows the
fields and the Envoy side.

TLS: the config file's tls section (cert_file, key_file, peer_ca_file, and
optionally client_ca_file and require_client_cert) serves gRPC and the Raft
transport over TLS. Peers must present a certificate of peer_ca_file to
sync, to pull state, to forward strict checks and to join the Raft group;
clients may present one of either CA, and must when require_client_cert is
true. The files are read again when they change, and on SIGHUP. Without
tls the agent serves plaintext, and only on loopback addresses unless the
file says insecure: true (or --insecure is given); either way it warns at
start.

Gossip encryption: secret_keys in the config file, a list of base64 keys
of 16, 24 or 32 random bytes (README.md shows how to make one), or
secret_keys_file, a file of them one per line, encrypt gossip; the first
key encrypts, every one decrypts, and a node without them, or with
others, cannot join. SIGHUP installs a changed list without a restart.
To rotate, reload every node at each step: add the new key second; make
it first; drop the old one.

With --http-addr the node also serves /metrics (Prometheus: per-rule
decisions and latency, sync traffic per peer, members by state, and the
Go runtime's and the process's metrics), /healthz (200 while running),
/readyz (200 once the node holds the fleet's state) and /debug/pprof/
over HTTP; pprof exposes the process, so keep that address private.

Exit status: 2 if the config is invalid or the node cannot start.

flags:
`

// agentOptions is how to run an agent: the config file merged with the
// command line.
type agentOptions struct {
	// file holds the node settings and rules; flags are already applied.
	file *configfile.Config
	// shutdownTimeout bounds, at stop, the drain of in-flight gRPC calls
	// and, separately, of HTTP requests.
	shutdownTimeout time.Duration
	// logger receives the agent's and the node's logs.
	logger *slog.Logger
	// now is the node's clock; nil is the wall clock.
	// Tests set it.
	now func() time.Time
	// envoyPaths are the --envoy-config files, and envoy their limits; nil
	// without any.
	envoyPaths []string
	envoy      *envoyrls.Limits
	// envoyHeaders is --envoy-response-headers.
	envoyHeaders bool
	// joinTimeout bounds the node's join and state pull at start; zero
	// is the node's default. Tests set it.
	joinTimeout time.Duration
}

// runAgent runs `sluice agent`.
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return agentMain(ctx, args, stdout, stderr, nil)
}

// agentMain is runAgent; ready, when not nil, is called with the running
// agent once it serves, so tests can learn its bound addresses.
func agentMain(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(*agent)) error {
	opts, err := parseAgentFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	log := opts.logger
	f := opts.file
	a, err := startAgent(ctx, opts)
	if err != nil {
		return err
	}
	rules := a.node.Rules()
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.Name
	}
	attrs := []any{"node", a.node.Name(), "grpc_addr", a.GRPCAddr(), "gossip_addr", orOff(a.GossipAddr()),
		"http_addr", orOff(a.HTTPAddr()), "rules", strings.Join(names, ","), "config", f.Path}
	if len(f.Join) > 0 {
		attrs = append(attrs, "join", f.Join)
	}
	if f.DataDir != "" {
		attrs = append(attrs, "data_dir", f.DataDir)
	}
	attrs = append(attrs, tlsAttrs(f)...)
	attrs = append(attrs, gossipAttrs(a)...)
	if len(opts.envoyPaths) > 0 {
		attrs = append(attrs, "envoy_config", strings.Join(opts.envoyPaths, ","))
	}
	log.Info("sluice agent serving", attrs...)
	for _, r := range rules {
		attrs := []any{"rule", r.Name, "count", r.Count, "time_window", r.Window, "window_type", r.Type}
		if r.IsStrict() {
			attrs = append(attrs, "sync_interval", "strict", "fail_mode", r.FailMode)
		} else {
			attrs = append(attrs, "sync_interval", r.SyncInterval, "allocation", r.Allocation)
		}
		for i, l := range r.Also {
			attrs = append(attrs, fmt.Sprintf("limits[%d]", i+1), fmt.Sprintf("%d per %v %v", l.Count, l.Window, l.Type))
		}
		if r.Shadow {
			attrs = append(attrs, "shadow", true)
		}
		log.Info("rule", attrs...)
	}
	if ready != nil {
		ready(a)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
serve:
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down", "reason", context.Cause(ctx))
			break serve
		case <-a.Done():
			log.Error("HTTP server stopped serving; shutting down", "err", a.Err())
			break serve
		case <-hup:
			a.reload(ctx, f.Path, log)
		}
	}
	if err := a.Stop(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// orOff is s, or "off" for a listener that is not configured.
func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return s
}

// parseAgentFlags reads the command line and the config file it names.
func parseAgentFlags(args []string, stdout, stderr io.Writer) (*agentOptions, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), agentUsage)
		printFlags(fs)
	}
	configPath := fs.String("config", "", "read node settings and rules from this YAML `FILE` (see examples/sluice.yaml)")
	name := fs.String("name", "", "node name, unique in the cluster and stable across restarts (default: the file's name, else the host name)")
	grpcAddr := fs.String("grpc-addr", defaultGRPCAddr, "serve the gRPC API on `HOST:PORT`; port 0 picks a free port")
	gossipAddr := fs.String("gossip-addr", "", "gossip (memberlist) on `HOST:PORT` and run as a cluster member; port 0 picks a free port (default: no gossip, a single node)")
	advertiseAddr := fs.String("advertise-addr", "", "gossip `HOST:PORT` peers reach this node on, when it differs from --gossip-addr (NAT, containers)")
	var join joinList
	fs.Var(&join, "join", "gossip addresses of peers to join, `HOST:PORT[,HOST:PORT…]` or dns:NAME:PORT; repeatable; needs --gossip-addr")
	var envoyPaths fileList
	fs.Var(&envoyPaths, "envoy-config", "serve Envoy's rate limit service with the limits of this envoyproxy/ratelimit config `FILE`, one domain per file; repeatable")
	envoyHeaders := fs.Bool("envoy-response-headers", false, "add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset to Envoy responses, as envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED")
	httpAddr := fs.String("http-addr", "", "serve /metrics, /healthz, /readyz and /debug/pprof/ on `HOST:PORT`; port 0 picks a free port (default: no HTTP)")
	dataDir := fs.String("data-dir", "", "keep state in this `DIR` across restarts (default: in memory)")
	plaintext := fs.Bool("insecure", false, "serve plaintext gRPC and Raft beyond loopback, on purpose: whoever reaches them can act as a client or a peer (the file's insecure: true)")
	shutdown := fs.Duration("shutdown-timeout", 10*time.Second, "on stop, wait this long for in-flight calls; 0 cuts them at once")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "log `LEVEL`: debug, info, warn or error")
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	set := setFlags(fs)

	var file *configfile.Config
	var err error
	if *configPath != "" {
		file, err = configfile.Load(*configPath)
	} else {
		file, err = configfile.Parse(defaultConfigName, defaultConfig)
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
	if set["insecure"] {
		if *plaintext && file.TLS != nil {
			return nil, usageError{fmt.Errorf("--insecure serves plaintext, but %s has a tls section", file.Path)}
		}
		file.Insecure = *plaintext
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
	if file.GossipAddr == "" {
		// Joining and advertising happen over gossip; without it they
		// would be silently ignored.
		for _, s := range []struct {
			flag, field string
			given       bool
		}{
			{"join", "join", len(file.Join) > 0},
			{"advertise-addr", "advertise_addr", file.AdvertiseAddr != ""},
		} {
			switch {
			case !s.given:
			case set[s.flag]:
				return nil, usageError{fmt.Errorf("--%s needs --gossip-addr: a node reaches its peers by gossip", s.flag)}
			default:
				return nil, fmt.Errorf("%s: %s needs gossip_addr (or --gossip-addr): a node reaches its peers by gossip",
					file.Path, s.field)
			}
		}
	}
	if err := checkPlaintext(file); err != nil {
		return nil, err
	}
	if *shutdown < 0 {
		return nil, usageError{fmt.Errorf("--shutdown-timeout must not be negative, got %v", *shutdown)}
	}
	opts := &agentOptions{
		file:            file,
		shutdownTimeout: *shutdown,
		logger:          slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		envoyPaths:      envoyPaths,
		envoyHeaders:    *envoyHeaders,
	}
	if len(envoyPaths) > 0 {
		if opts.envoy, err = loadEnvoy(envoyPaths); err != nil {
			return nil, err
		}
	} else if *envoyHeaders {
		return nil, usageError{errors.New("--envoy-response-headers needs --envoy-config")}
	}
	return opts, nil
}

// fileList is a repeatable flag of file names.
type fileList []string

func (l *fileList) String() string { return strings.Join(*l, ",") }

// Set adds the file s.
func (l *fileList) Set(s string) error {
	if s == "" {
		return errors.New("the file name is empty")
	}
	*l = append(*l, s)
	return nil
}

// loadEnvoy reads the envoyproxy/ratelimit config files, one domain each.
func loadEnvoy(paths []string) (*envoyrls.Limits, error) {
	domains := make([]*envoyrls.Domain, 0, len(paths))
	var errs []error
	for _, p := range paths {
		d, err := envoyrls.Load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		domains = append(domains, d)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return envoyrls.NewLimits(domains...)
}

// joinList is the --join flag: gossip addresses of peers, HOST:PORT or
// dns:NAME:PORT, comma-separated and repeatable.
type joinList []string

func (l *joinList) String() string { return strings.Join(*l, ",") }

// Set adds the comma-separated addresses in s.
func (l *joinList) Set(s string) error {
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if err := checkJoinAddr(a); err != nil {
			return err
		}
		*l = append(*l, a)
	}
	return nil
}

// checkJoinAddr reports whether a is a seed the node can join: HOST:PORT,
// or dns:NAME:PORT for every address NAME resolves to.
func checkJoinAddr(a string) error {
	const want = "a --join address must be HOST:PORT or dns:NAME:PORT"
	rest, isDNS := strings.CutPrefix(a, "dns:")
	host, port, err := net.SplitHostPort(rest)
	switch {
	case err != nil:
		return fmt.Errorf("%s, got %q: %w", want, a, err)
	case isDNS && host == "":
		return fmt.Errorf("%s, got %q: the DNS name is empty", want, a)
	case !isDNS && host == "":
		// Joining ":7946" would mean this machine; say so.
		return fmt.Errorf("%s, got %q: the host is empty", want, a)
	}
	if err := cluster.CheckHostPort("--join", net.JoinHostPort(host, port)); err != nil {
		return fmt.Errorf("%s, got %q: the port must be a number 0–65535", want, a)
	}
	return nil
}

// agent is a running node: it serves gRPC itself, and the agent adds the
// HTTP API when asked to.
type agent struct {
	node            *cluster.Node
	shutdownTimeout time.Duration
	// builtin are the rules of the built-in config when the agent runs
	// without --config, which a reload keeps.
	builtin []window.Rule
	// plaintext is the gossip_plaintext the node started with, which a
	// reload cannot change.
	plaintext cluster.GossipPlaintext
	// envoyPaths are the --envoy-config files a reload reads again, and
	// rls serves their limits; nil without any.
	envoyPaths []string
	rls        *envoyrls.Server

	// mem gives the memory of keys the node dropped back to the system.
	mem *memReleaser

	http     *http.Server  // nil without http_addr
	httpLis  net.Listener  // nil without http_addr
	httpDone chan struct{} // closed when the HTTP server stops; nil without it
	httpErr  error         // what Serve returned; read after httpDone

	stopOnce sync.Once
	stopErr  error
}

// startAgent starts a node with opts' settings and rules, and serves its
// HTTP API when the config has an http_addr. The node joins its peers before
// startAgent returns. The agent runs until Stop.
func startAgent(ctx context.Context, opts *agentOptions) (*agent, error) {
	f := opts.file
	cfg, err := f.NodeConfig()
	if err != nil {
		return nil, err
	}
	logger := opts.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = defaultGRPCAddr
	}
	shutdown := opts.shutdownTimeout
	if shutdown <= 0 {
		shutdown = time.Nanosecond // the node reads 0 as its default
	}
	cfg.ShutdownTimeout = shutdown
	cfg.Logger = logger
	cfg.Now = opts.now
	cfg.JoinTimeout = opts.joinTimeout
	// The agent serves whatever rules its file holds, strict ones too.
	cfg.Strict = strict.Mode{}
	a := &agent{shutdownTimeout: shutdown, envoyPaths: opts.envoyPaths, plaintext: cfg.GossipPlaintext}
	if f.Path == defaultConfigName {
		a.builtin = cfg.Rules
	}
	if opts.envoy != nil {
		limits := opts.envoy
		if cfg.Rules, err = limits.AddTo(cfg.Rules, f.Path); err != nil {
			return nil, err
		}
		rlsOpts := envoyrls.Options{ResponseHeaders: opts.envoyHeaders, Logger: logger, Now: opts.now}
		cfg.GRPCServices = append(cfg.GRPCServices, func(s grpc.ServiceRegistrar, n *cluster.Node) {
			a.rls = envoyrls.NewServer(n, limits, rlsOpts)
			a.rls.Register(s)
		})
	}

	// Bind HTTP first: a busy port then fails the start before the node
	// joins the cluster only to leave it again.
	if f.HTTPAddr != "" {
		var lc net.ListenConfig
		lis, err := lc.Listen(ctx, "tcp", f.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("http_addr: %w", err)
		}
		a.httpLis = lis
		if !isLoopback(f.HTTPAddr) {
			// The operator port has no authentication, and pprof shows
			// the process: command line, heap, goroutines.
			logger.Warn("serving /metrics and /debug/pprof/ without authentication beyond loopback; keep http_addr on a private network",
				"http_addr", lis.Addr().String())
		}
	}

	node, err := cluster.Start(ctx, cfg)
	if err != nil {
		if a.httpLis != nil {
			a.httpLis.Close()
		}
		return nil, fmt.Errorf("start node: %w", err)
	}
	a.node = node
	a.mem = startMemReleaser(node.Keys, freeOSMemory, releaseEvery)

	if a.httpLis != nil {
		a.http = &http.Server{
			Handler:           operatorHandler(node, a.rls, logger),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(logger.With("server", "http").Handler(), slog.LevelWarn),
		}
		a.httpDone = make(chan struct{})
		go func() {
			defer close(a.httpDone)
			a.httpErr = a.http.Serve(a.httpLis)
		}()
	}
	return a, nil
}

// GRPCAddr returns the address the node serves gRPC on, with the port the
// system picked when the config said 0.
func (a *agent) GRPCAddr() string { return a.node.GRPCAddr() }

// GossipAddr returns the address the node gossips on, or "" without gossip.
func (a *agent) GossipAddr() string { return a.node.GossipAddr() }

// HTTPAddr returns the address the HTTP API is served on, or "" without it.
func (a *agent) HTTPAddr() string {
	if a.httpLis == nil {
		return ""
	}
	return a.httpLis.Addr().String()
}

// Done is closed when the HTTP server stops serving; it is nil, never
// closed, without one.
func (a *agent) Done() <-chan struct{} { return a.httpDone }

// Err returns why the HTTP server stopped serving, once Done is closed.
func (a *agent) Err() error {
	if a.httpDone == nil {
		return nil
	}
	<-a.httpDone
	return a.httpErr
}

// Stop closes the node (it leaves the cluster, drains in-flight gRPC calls
// for at most the shutdown timeout and saves its state) and then the HTTP
// server, so /healthz answers 503 while the node drains. It is safe to call
// more than once.
func (a *agent) Stop() error {
	a.stopOnce.Do(func() {
		a.mem.Stop()
		errs := []error{a.node.Close()}
		if a.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), a.shutdownTimeout)
			if err := a.http.Shutdown(ctx); err != nil {
				// A request outlived the timeout (a CPU profile, say): cut it.
				_ = a.http.Close()
			}
			cancel()
			<-a.httpDone
			if a.httpErr != nil && !errors.Is(a.httpErr, http.ErrServerClosed) {
				errs = append(errs, fmt.Errorf("serve http: %w", a.httpErr))
			}
		}
		a.stopErr = errors.Join(errs...)
	})
	return a.stopErr
}

// operatorHandler is the node's /healthz and /readyz, /metrics from a
// registry of the agent's own (with rls, the Envoy service's counters too),
// and the pprof profiles under /debug/pprof/.
func operatorHandler(node *cluster.Node, rls *envoyrls.Server, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", node.HTTPHandler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(metricsRegistry(node, rls), promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.With("server", "metrics").Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError, // a series that fails leaves the others served
	}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// metricsRegistry is what the agent's /metrics serves: the node's
// metrics, the Envoy service's when rls is not nil, and the Go runtime's and
// the process's (memory, GC, goroutines, CPU, open files) that operators
// expect of a daemon. It is a registry of its own, not the global one.
func metricsRegistry(node *cluster.Node, rls *envoyrls.Server) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prom.NewCollector(node), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if rls != nil {
		reg.MustRegister(newEnvoyCollector(rls))
	}
	return reg
}

// reload re-reads the rules of the config file and of the --envoy-config
// files and gives them to the node (SIGHUP), with the file's gossip keys
// (secret_keys, or the secret_keys_file read again). Only the rules and the
// keys change; other settings need a restart. A file that does not parse
// leaves the running rules and keys alone, and so do Envoy limits whose
// rule names meet.
func (a *agent) reload(ctx context.Context, path string, log *slog.Logger) {
	// The TLS files of the running node, whatever becomes of the rules;
	// the file's tls section itself is read at start alone.
	if err := a.node.ReloadTLS(); err != nil {
		log.Error("SIGHUP: TLS files not reloaded; the node keeps the certificates it has", "err", err)
	}
	builtin := path == "" || path == defaultConfigName
	if builtin && len(a.envoyPaths) == 0 {
		log.Warn("SIGHUP: the agent runs on built-in rules; there is no file to reload")
		return
	}
	rules := a.builtin
	if !builtin {
		file, err := configfile.Load(path)
		if err != nil {
			a.node.ReloadFailed()
			log.Error("SIGHUP: config not reloaded", "err", err)
			return
		}
		if rules, err = file.NodeRules(); err != nil {
			a.node.ReloadFailed()
			log.Error("SIGHUP: config not reloaded", "err", err)
			return
		}
		a.reloadKeys(file, log)
	}
	var limits *envoyrls.Limits
	if len(a.envoyPaths) > 0 {
		var err error
		if limits, err = loadEnvoy(a.envoyPaths); err == nil {
			rules, err = limits.AddTo(rules, path)
		}
		if err != nil {
			a.node.ReloadFailed()
			log.Error("SIGHUP: config not reloaded", "err", err)
			return
		}
	}
	if err := a.node.Reload(ctx, rules); err != nil {
		log.Error("SIGHUP: rules not reloaded", "err", err)
		return
	}
	if limits != nil && a.rls != nil {
		// After the node's rules, so that every limit's rule exists.
		a.rls.SetLimits(limits)
	}
	attrs := []any{"config", path, "rules", len(rules)}
	if len(a.envoyPaths) > 0 {
		attrs = append(attrs, "envoy_config", strings.Join(a.envoyPaths, ","))
	}
	log.Info("SIGHUP: rules reloaded", attrs...)
}

// reloadKeys gives the node the gossip keys of the config file just read
// (SIGHUP): a rotation. Keys that cannot be read, or that the node refuses,
// leave the keys in use as they are, and the rules are reloaded all the
// same.
func (a *agent) reloadKeys(file *configfile.Config, log *slog.Logger) {
	if p, err := cluster.ParseGossipPlaintext(file.GossipPlaintext); err == nil && p != a.plaintext {
		log.Warn("SIGHUP: gossip_plaintext changed; it takes a restart, and the node keeps what it started with",
			"running", a.plaintext.String(), "file", p.String())
	}
	keys, err := file.NodeSecretKeys()
	if err != nil {
		a.node.SecretKeysFailed()
		log.Error("SIGHUP: gossip keys not reloaded; the node keeps the keys it has", "err", err)
		return
	}
	before := a.node.Metrics().GossipKeyReloads
	if err := a.node.SetSecretKeys(keys); err != nil {
		log.Error("SIGHUP: gossip keys not reloaded; the node keeps the keys it has", "err", err)
		return
	}
	if a.node.Metrics().GossipKeyReloads != before {
		log.Info("SIGHUP: gossip keys reloaded", "keys", len(keys))
	}
}
