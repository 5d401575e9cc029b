package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// Modes and transports of a throughput run.
const (
	// ModeBatched decides every check locally from the node's view; the
	// nodes exchange deltas every Sync.
	ModeBatched = "batched"
	// ModeStrict decides every check through the Raft log.
	ModeStrict = "strict"
	// TransportEmbedded calls Node.Allow in this process: the decision path
	// alone.
	TransportEmbedded = "embedded"
	// TransportGRPC calls the Limiter.Check RPC on the nodes' gRPC
	// addresses: the decision path plus a client's round trip over loopback.
	TransportGRPC = "grpc"
	// TransportGRPCBatch calls Limiter.CheckBatch with Batch checks a call.
	TransportGRPCBatch = "grpc-batch"
	// TransportGRPCNoop calls a method with Check's request and response
	// on the same nodes' servers, whose handler decides nothing: what gRPC
	// itself costs here, the reference every gRPC figure is a fraction of.
	TransportGRPCNoop = "grpc-noop"
)

// throughputRule is the name of the one rule a throughput run checks.
const throughputRule = "bench"

// Bounds on a throughput run's knobs.
const (
	maxConcurrency = 1 << 16
	maxKeys        = 10_000_000
	maxZipf        = 10
	// readyTimeout bounds how long a strict run waits for every node to
	// reach the strict leader before it starts.
	readyTimeout = 20 * time.Second
)

// ThroughputConfig is one throughput run. Start from ThroughputDefaults.
type ThroughputConfig struct {
	// Mode is ModeBatched or ModeStrict.
	Mode string
	// Nodes is the in-process cluster's size, 1 … MaxNodes. One node runs
	// without gossip (and, in strict mode, with a single-voter Raft group
	// on an in-memory transport).
	Nodes int
	// Transport is TransportEmbedded, TransportGRPC, TransportGRPCBatch or
	// TransportGRPCNoop. Over gRPC each node has one client connection,
	// which its workers share.
	Transport string
	// Batch is how many checks a TransportGRPCBatch call carries, 1 …
	// cluster.MaxBatchChecks; ignored by the other transports.
	Batch int
	// Zipf, when above 1, draws keys from a Zipf distribution of that
	// exponent (key 0 the hottest) instead of uniformly.
	Zipf float64
	// Hits is what each check spends, ≥ 1.
	Hits int64
	// LatencyEvery times one call in LatencyEvery (two clock readings and
	// a histogram update), so that timing does not weigh on a fast path;
	// 0 times every gRPC call and one embedded call in 64.
	LatencyEvery int
	// Concurrency is the number of workers, each issuing one check at a
	// time; worker i uses node i mod Nodes.
	Concurrency int
	// Keys is how many distinct keys the checks spread over; each worker
	// draws them at random (uniformly, or by Zipf) from its own generator
	// seeded by Seed.
	Keys int
	// Duration is the measured stretch; Warmup runs the same load before
	// it, unmeasured.
	Duration, Warmup time.Duration
	// Limit is the rule's count. The default, window.MaxCount, admits every
	// check, so the run measures the decision path, not refusals.
	Limit int64
	// Window is the rule's window length and Type its window type.
	Window time.Duration
	Type   window.Type
	// Sync is a batched rule's sync interval; ignored in strict mode.
	Sync time.Duration
	// DataDir, if set, keeps each node's state on disk in a fresh
	// subdirectory of DataDir (removed after the run): in strict mode the
	// Raft log is then durable badger with synced writes. Empty keeps
	// everything in memory.
	DataDir string
	// Seed seeds the workers' key choices.
	Seed uint64
	// StrictTimeout is the nodes' cluster.Config.StrictTimeout: how long a
	// strict check waits for the log before its rule's fail_mode answers.
	// Zero keeps the node's default.
	StrictTimeout time.Duration
	// NodeLogger receives the nodes' logs; nil discards them.
	NodeLogger *slog.Logger
	// Targets, when set, are the gRPC addresses (host:port) of running
	// nodes (sluice agent) to measure instead of an in-process cluster:
	// worker i calls Targets[i mod len], over TransportGRPC or
	// TransportGRPCBatch, checking TargetRule, which those nodes enforce.
	// Nodes, Mode, Limit, Window, Type, Sync, DataDir and StrictTimeout are
	// theirs, not the run's; CPUSPerMillion and AllocsPerDecision are then
	// the measuring process's alone, and the nodes' counters are not read.
	Targets    []string
	TargetRule string
}

// ThroughputDefaults returns a 10-second strict run of 3 nodes with 64
// embedded workers over 10,000 keys.
func ThroughputDefaults() ThroughputConfig {
	return ThroughputConfig{
		Mode: ModeStrict, Nodes: 3, Transport: TransportEmbedded, Batch: 100, Hits: 1, Concurrency: 64, Keys: 10_000,
		Duration: 10 * time.Second, Warmup: time.Second, Limit: window.MaxCount,
		Window: time.Second, Type: window.Sliding, Sync: 200 * time.Millisecond, Seed: 1,
	}
}

// rule returns the one rule the run checks.
func (c *ThroughputConfig) rule() window.Rule {
	r := window.Rule{Name: throughputRule, Count: c.Limit, Window: c.Window, Type: c.Type, SyncInterval: c.Sync}
	if c.Mode == ModeStrict {
		r.SyncInterval = window.Strict
	}
	return r
}

// Validate checks c and returns an error that starts with the name of the
// first field out of range, as the `sluice bench throughput` flag spells it
// (limit, window, sync for the rule's count, time_window, sync_interval).
func (c *ThroughputConfig) Validate() error {
	if len(c.Targets) > 0 {
		return c.validateTargets()
	}
	switch {
	case c.Transport == TransportRedisLua:
		return errors.New("target: redis-lua measures a Redis: give its address")
	case c.Mode != ModeBatched && c.Mode != ModeStrict:
		return fmt.Errorf("mode: must be %s or %s, got %q", ModeBatched, ModeStrict, c.Mode)
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return fmt.Errorf("nodes: must be in [1, %d] for an in-process cluster, got %d", MaxNodes, c.Nodes)
	case !slices.Contains([]string{TransportEmbedded, TransportGRPC, TransportGRPCBatch, TransportGRPCNoop}, c.Transport):
		return fmt.Errorf("transport: must be %s, %s, %s or %s, got %q",
			TransportEmbedded, TransportGRPC, TransportGRPCBatch, TransportGRPCNoop, c.Transport)
	case c.StrictTimeout < 0:
		return fmt.Errorf("strict-timeout: must be ≥ 0, got %v", c.StrictTimeout)
	}
	if err := c.validateLoad(c.Limit); err != nil {
		return err
	}
	r := c.rule()
	if err := r.Validate(); err != nil {
		var fe *window.FieldError
		if errors.As(err, &fe) {
			flag := map[string]string{"count": "limit", "time_window": "window", "sync_interval": "sync",
				"window_type": "type"}[fe.Field]
			if flag != "" {
				return fmt.Errorf("%s: %s", flag, fe.Problem)
			}
		}
		return err
	}
	return nil
}

// validateTargets checks a run against running nodes.
func (c *ThroughputConfig) validateTargets() error {
	for _, t := range c.Targets {
		if _, _, err := net.SplitHostPort(t); err != nil {
			return fmt.Errorf("target: %q is not host:port: %w", t, err)
		}
	}
	if c.Transport == TransportRedisLua {
		return c.validateRedis()
	}
	switch {
	case c.TargetRule == "":
		return errors.New("rule: name the rule the targets enforce")
	case c.Transport != TransportGRPC && c.Transport != TransportGRPCBatch:
		return fmt.Errorf("transport: must be %s, %s or %s against running nodes, got %q", TransportGRPC, TransportGRPCBatch, TransportRedisLua, c.Transport)
	}
	// The targets' rule bounds the hits; they say so if a check asks more.
	return c.validateLoad(0)
}

// validateRedis checks a run against Redis: one address, and the window
// the script keeps.
func (c *ThroughputConfig) validateRedis() error {
	switch {
	case len(c.Targets) != 1:
		return fmt.Errorf("target: one Redis address, got %d", len(c.Targets))
	case c.TargetRule != "":
		return errors.New("rule: the Redis script has no rules; it counts --limit per --window")
	case c.Limit < 1 || c.Limit > window.MaxCount:
		return fmt.Errorf("limit: must be in [1, %d], got %d", window.MaxCount, c.Limit)
	case c.Window < time.Millisecond:
		return fmt.Errorf("window: must be ≥ 1ms, got %v", c.Window)
	case c.Type != window.Sliding:
		return errors.New("type: the Redis script keeps a sliding window")
	}
	return c.validateLoad(c.Limit)
}

// validateLoad checks the knobs of the load every run has, whatever it
// measures; limit, when above 0, bounds the hits of a check.
func (c *ThroughputConfig) validateLoad(limit int64) error {
	switch {
	case c.Transport == TransportGRPCBatch && (c.Batch < 1 || c.Batch > cluster.MaxBatchChecks):
		return fmt.Errorf("batch: must be in [1, %d], got %d", cluster.MaxBatchChecks, c.Batch)
	case c.Zipf != 0 && !(c.Zipf > 1 && c.Zipf <= maxZipf):
		return fmt.Errorf("zipf: must be 0 (uniform) or in (1, %g], got %g", float64(maxZipf), c.Zipf)
	case c.Hits < 1:
		return fmt.Errorf("hits: must be ≥ 1, got %d", c.Hits)
	case limit > 0 && c.Hits > limit:
		return fmt.Errorf("hits: must be in [1, limit %d], got %d", limit, c.Hits)
	case c.LatencyEvery < 0:
		return fmt.Errorf("latency-every: must be ≥ 0, got %d", c.LatencyEvery)
	case c.Concurrency < 1 || c.Concurrency > maxConcurrency:
		return fmt.Errorf("concurrency: must be in [1, %d], got %d", maxConcurrency, c.Concurrency)
	case c.Keys < 1 || c.Keys > maxKeys:
		return fmt.Errorf("keys: must be in [1, %d], got %d", maxKeys, c.Keys)
	case c.Duration <= 0:
		return fmt.Errorf("duration: must be > 0, got %v", c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("warmup: must be ≥ 0, got %v", c.Warmup)
	}
	return nil
}

// ruleName is the rule the run checks.
func (c *ThroughputConfig) ruleName() string {
	if len(c.Targets) > 0 {
		return c.TargetRule
	}
	return throughputRule
}

// ThroughputResult is what a throughput run measured. Latencies are per
// call, from just before it to just after it returned, in microseconds, for
// the calls that started in the measured stretch and returned no error.
type ThroughputResult struct {
	Mode  string `json:"mode,omitempty"` // not against Targets
	Nodes int    `json:"nodes"`
	// Targets and Rule are the running nodes measured, and their rule.
	Targets     []string `json:"targets,omitempty"`
	Rule        string   `json:"rule,omitempty"`
	Transport   string   `json:"transport"`
	Concurrency int      `json:"concurrency"`
	Batch       int      `json:"batch,omitempty"` // grpc-batch only
	Keys        int      `json:"keys"`
	Zipf        float64  `json:"zipf,omitempty"`
	Hits        int64    `json:"hits"`
	Limit       int64    `json:"limit"`
	WindowS     float64  `json:"window_s"`
	Type        string   `json:"type"`
	SyncS       float64  `json:"sync_s,omitempty"` // batched only
	Durable     bool     `json:"durable"`          // state on disk (DataDir)
	WarmupS     float64  `json:"warmup_s"`
	// DurationS is the measured stretch: the configured duration, or less
	// when the run was stopped.
	DurationS  float64 `json:"duration_s"`
	GOMAXPROCS int     `json:"gomaxprocs"`

	// Decisions are the checks decided by the calls that started in the
	// measured stretch and returned no error; Admitted of them were
	// allowed. Errors are the calls that returned an error instead;
	// FirstError is the first one.
	Decisions  int64  `json:"decisions"`
	Admitted   int64  `json:"admitted"`
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Unknown are the errors that are strict checks whose outcome is
	// unknown (cluster.ErrOutcomeUnknown; gRPC's Aborted): the leader
	// changed while committing them, and the log may or may not hold them.
	Unknown       int64   `json:"unknown"`
	DecisionsPerS float64 `json:"decisions_per_s"`
	// Calls are the calls that started in the measured stretch: one per
	// decision but over grpc-batch, which decides Batch a call.
	Calls int64 `json:"calls"`
	// CPUSPerMillion is the process's CPU time (user and system, every
	// node, the workers and the gRPC clients included) over the measured
	// stretch, per million decisions.
	CPUSPerMillion float64 `json:"cpu_s_per_million"`
	// AllocsPerDecision are the process's heap allocations over the
	// measured stretch, per decision: the nodes', the workers' and the
	// gRPC clients' and servers'.
	AllocsPerDecision float64 `json:"allocs_per_decision"`
	// LatencyEvery says the latencies are of one call in LatencyEvery.
	LatencyEvery int `json:"latency_every"`

	MinUS  float64 `json:"min_us"`
	MeanUS float64 `json:"mean_us"`
	P50US  float64 `json:"p50_us"`
	P90US  float64 `json:"p90_us"`
	P99US  float64 `json:"p99_us"`
	P999US float64 `json:"p999_us"`
	MaxUS  float64 `json:"max_us"`

	// ByPath counts decisions by what made them (window.Path names:
	// local, strict, fail-open, fail-closed, fail-local). The gRPC answer
	// does not say, so a grpc run leaves it empty.
	ByPath map[string]int64 `json:"by_path,omitempty"`
	// StrictEntries are the Raft log entries the leader committed during
	// the measured stretch and ChecksPerEntry the checks they held on
	// average (group commit); Failovers are strict checks answered by the
	// rule's fail_mode for want of a leader. Read from the nodes' metrics
	// at the stretch's edges, so approximate by the entries in flight then.
	StrictEntries  int64   `json:"strict_entries,omitempty"`
	ChecksPerEntry float64 `json:"checks_per_entry,omitempty"`
	Failovers      int64   `json:"failovers"`
	// EntriesPerS are StrictEntries per second.
	EntriesPerS float64 `json:"entries_per_s,omitempty"`
	// SyncDeltas are the delta messages the nodes sent each other during
	// the measured stretch (batched mode), and SyncBytesPerS the bytes of
	// them a node wrote per second, on average over the nodes.
	SyncDeltas    int64   `json:"sync_deltas,omitempty"`
	SyncBytesPerS float64 `json:"sync_bytes_per_s,omitempty"`
}

// checkFunc decides, on one node, one check of hits for each of keys in
// one call, into out (as long as keys).
type checkFunc func(ctx context.Context, keys []string, hits int64, out []cluster.Decision) error

// Throughput starts an in-process cluster, drives it with Concurrency
// workers each issuing one check at a time for Warmup plus Duration, and
// reports the decisions per second and the latency of each call over
// Duration. A strict run starts measuring (warm-up included) only once
// every node reaches the strict leader.
//
// Every goroutine it starts has stopped and the cluster is closed when it
// returns. When ctx ends the run early it returns what it measured so far,
// if anything, and ctx's error.
func Throughput(ctx context.Context, c ThroughputConfig) (*ThroughputResult, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	dataDir := ""
	if c.DataDir != "" {
		if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("data-dir: %w", err)
		}
		d, err := os.MkdirTemp(c.DataDir, "throughput-")
		if err != nil {
			return nil, fmt.Errorf("data-dir: %w", err)
		}
		dataDir = d
		defer os.RemoveAll(d)
	}
	// Nodes closing together log harmless errors (a peer's Raft transport
	// is gone, a gossip leave is not acknowledged): the run's logs end with
	// the run.
	gate := &logGate{closed: &atomic.Bool{}}
	if c.NodeLogger != nil {
		gate.next = c.NodeLogger.Handler()
		c.NodeLogger = slog.New(gate)
	}
	cl := &Cluster{}
	if len(c.Targets) == 0 {
		var err error
		if cl, err = startThroughputCluster(ctx, &c, dataDir, func() { gate.closed.Store(true) }); err != nil {
			return nil, err
		}
	}
	res, runErr := runThroughput(ctx, cl, &c)
	gate.closed.Store(true)
	if err := cl.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("closing the bench cluster: %w", err)
	}
	return res, runErr
}

// startThroughputCluster starts c.Nodes nodes as StartCluster does, with
// each node's state in dataDir/nI when dataDir is set. One node runs without
// gossip, and serves gRPC only for the grpc transport. On error it calls
// quiet, then closes what it started.
func startThroughputCluster(ctx context.Context, c *ThroughputConfig, dataDir string, quiet func()) (*Cluster, error) {
	rules := []window.Rule{c.rule()}
	logger := c.NodeLogger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cl := &Cluster{clock: newClock()}
	for i := range c.Nodes {
		cfg := cluster.Config{
			Name: "n" + strconv.Itoa(i), Rules: rules,
			JoinTimeout: 5 * time.Second, ShutdownTimeout: time.Second,
			// The nodes' own clock: a throughput run steps no time, and
			// a clock read is part of every decision.
			Logger: logger, StrictTimeout: c.StrictTimeout,
			StrictBootstrapWait: freshBootstrapWait, Strict: strict.Mode{},
		}
		if c.Nodes > 1 || c.Transport != TransportEmbedded {
			cfg.GRPCAddr = "127.0.0.1:0"
		}
		if c.Transport == TransportGRPCNoop {
			cfg.GRPCServices = []func(grpc.ServiceRegistrar, *cluster.Node){registerNoop}
		}
		if c.Nodes > 1 {
			cfg.BindAddr = "127.0.0.1:0"
			if i > 0 {
				cfg.Join = []string{cl.Nodes[0].GossipAddr()}
			}
		}
		if dataDir != "" {
			cfg.DataDir = filepath.Join(dataDir, cfg.Name)
		}
		nd, err := cluster.Start(ctx, cfg)
		if err != nil {
			quiet()
			return nil, errors.Join(fmt.Errorf("start node %s: %w", cfg.Name, err), cl.Close())
		}
		cl.Nodes = append(cl.Nodes, nd)
	}
	if err := cl.waitFormed(ctx); err != nil {
		quiet()
		return nil, errors.Join(err, cl.Close())
	}
	if c.Mode == ModeStrict {
		if err := waitStrictReady(ctx, cl, throughputRule); err != nil {
			quiet()
			return nil, errors.Join(err, cl.Close())
		}
	}
	return cl, nil
}

// waitStrictReady returns once every node decides a strict check of rule
// through the log: the group has its voters, every node knows the leader,
// and the log knows the rule. It asks with hits = 0, which spends nothing,
// and asks again every probeEvery until the answer comes from the log;
// nothing signals readiness, so it polls as waitFormed does.
func waitStrictReady(ctx context.Context, cl *Cluster, rule string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for _, nd := range cl.Nodes {
		for {
			d, err := nd.Allow(ctx, rule, "ready", 0)
			if err == nil && d.Path == window.PathStrict {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s did not reach a strict leader (last answer: path %v, err %v): %w",
					nd.Name(), d.Path, err, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}

// probeEvery paces waitStrictReady's probes of a node not ready yet.
const probeEvery = 10 * time.Millisecond

// tputWorker is one load generator's tally, merged after the run.
type tputWorker struct {
	hist      latencyHist
	calls     int64
	decisions int64
	admitted  int64
	errors    int64
	unknown   int64
	firstErr  error
	paths     [window.PathFailLocal + 1]int64
}

// The phases of a throughput run, as its workers read them before each
// call: a call is tallied by the phase it started in.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// metricsSum adds up the nodes' counters that a run reports.
type metricsSum struct {
	entries, checks, failovers, deltas, bytes int64
	cpu                                       time.Duration // the process's
	mallocs                                   uint64        // the process's heap allocations
}

func sumMetrics(cl *Cluster) metricsSum {
	var s metricsSum
	for _, nd := range cl.Nodes {
		m := nd.Metrics()
		s.entries += m.StrictEntries
		s.checks += m.StrictChecks
		s.failovers += m.StrictFailovers
		s.deltas += m.DeltasSent
		s.bytes += m.BytesSent
	}
	s.cpu = processCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.mallocs = ms.Mallocs
	return s
}

// runThroughput drives cl and tallies the measured stretch.
func runThroughput(ctx context.Context, cl *Cluster, c *ThroughputConfig) (*ThroughputResult, error) {
	checks, closeClients, err := checkFuncs(ctx, cl, c)
	if err != nil {
		return nil, err
	}
	defer closeClients()

	keys := make([]string, c.Keys)
	for i := range keys {
		keys[i] = "k:" + strconv.Itoa(i)
	}
	every := c.latencyEvery()
	workers := make([]*tputWorker, c.Concurrency)
	var phase atomic.Int32
	start := time.Now().Add(c.Warmup)
	before, after := sumMetrics(cl), metricsSum{}
	if c.Warmup == 0 {
		// Without a warm-up every call is measured, the first included.
		phase.Store(phaseMeasure)
	}
	var wg sync.WaitGroup
	for i := range workers {
		w := &tputWorker{}
		workers[i] = w
		check := checks[i%len(checks)]
		wg.Go(func() {
			// Made by the worker, so that its generator's state, written at
			// every draw, is not on a cache line beside another worker's.
			pick := keyPicker(keys, c.Zipf, rand.New(rand.NewPCG(c.Seed, uint64(i))))
			w.run(ctx, check, pick, c.batch(), c.Hits, every, &phase)
		})
	}

	// Read the nodes' counters at the edges of the measured stretch.
	stopped := false
	if c.Warmup > 0 {
		stopped = !waitUntil(ctx, start)
		if !stopped {
			before = sumMetrics(cl)
			phase.Store(phaseMeasure)
			start = time.Now()
		}
	}
	if !stopped {
		stopped = !waitUntil(ctx, start.Add(c.Duration))
		after = sumMetrics(cl)
	}
	phase.Store(phaseDone)
	measured := c.Duration
	if stopped {
		measured = max(0, min(time.Since(start), c.Duration))
	}
	wg.Wait()
	if stopped && measured == 0 {
		return nil, context.Cause(ctx)
	}

	res := &ThroughputResult{
		Mode: c.Mode, Nodes: c.Nodes, Transport: c.Transport, Concurrency: c.Concurrency, Keys: c.Keys,
		Targets: c.Targets, Rule: c.ruleName(),
		Zipf: c.Zipf, Hits: c.Hits, LatencyEvery: every,
		Limit: c.Limit, WindowS: c.Window.Seconds(), Type: c.Type.String(), Durable: c.DataDir != "",
		WarmupS: c.Warmup.Seconds(), DurationS: measured.Seconds(), GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	if c.Transport == TransportGRPCBatch {
		res.Batch = c.Batch
	}
	switch {
	case c.Transport == TransportRedisLua:
		res.Mode, res.Nodes, res.Rule, res.Durable = "", 1, "", false
	case len(c.Targets) > 0:
		// The rule and the nodes are the targets'.
		res.Mode, res.Nodes, res.Limit, res.WindowS, res.Type, res.Durable = "", len(c.Targets), 0, 0, "", false
	case c.Mode == ModeBatched:
		res.SyncS = c.Sync.Seconds()
	}
	var hist latencyHist
	var paths [window.PathFailLocal + 1]int64
	for _, w := range workers {
		hist.merge(&w.hist)
		res.Calls += w.calls
		res.Decisions += w.decisions
		res.Admitted += w.admitted
		res.Errors += w.errors
		res.Unknown += w.unknown
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
		for p, n := range w.paths {
			paths[p] += n
		}
	}
	if c.Transport == TransportEmbedded {
		res.ByPath = map[string]int64{}
		for p, n := range paths {
			if n > 0 {
				res.ByPath[window.Path(p).String()] = n
			}
		}
	}
	secs := measured.Seconds()
	res.DecisionsPerS = float64(res.Decisions) / secs
	if hist.count > 0 {
		us := func(ns int64) float64 { return float64(ns) / 1e3 }
		res.MinUS, res.MaxUS = us(hist.min), us(hist.max)
		res.MeanUS = float64(hist.sum) / float64(hist.count) / 1e3
		res.P50US, res.P90US = us(hist.quantile(0.50)), us(hist.quantile(0.90))
		res.P99US, res.P999US = us(hist.quantile(0.99)), us(hist.quantile(0.999))
	}
	if !stopped && res.Decisions > 0 {
		if after.cpu > 0 {
			res.CPUSPerMillion = (after.cpu - before.cpu).Seconds() / float64(res.Decisions) * 1e6
		}
		res.AllocsPerDecision = float64(after.mallocs-before.mallocs) / float64(res.Decisions)
	}
	res.StrictEntries = after.entries - before.entries
	if res.StrictEntries > 0 {
		res.ChecksPerEntry = float64(after.checks-before.checks) / float64(res.StrictEntries)
		res.EntriesPerS = float64(res.StrictEntries) / secs
	}
	res.Failovers = after.failovers - before.failovers
	res.SyncDeltas = after.deltas - before.deltas
	if c.Nodes > 1 && !stopped {
		res.SyncBytesPerS = float64(after.bytes-before.bytes) / secs / float64(c.Nodes)
	}
	if stopped {
		return res, context.Cause(ctx)
	}
	return res, nil
}

// latencyEvery is LatencyEvery, or its default for the transport.
func (c *ThroughputConfig) latencyEvery() int {
	switch {
	case c.LatencyEvery > 0:
		return c.LatencyEvery
	case c.Transport == TransportEmbedded:
		return defaultEmbeddedLatencyEvery
	}
	return 1
}

// defaultEmbeddedLatencyEvery is how seldom an embedded call is timed by
// default: the clock readings and the histogram update would otherwise
// cost a large part of a call that takes a hundred nanoseconds.
const defaultEmbeddedLatencyEvery = 64

// batch is how many checks a call carries.
func (c *ThroughputConfig) batch() int {
	if c.Transport == TransportGRPCBatch {
		return c.Batch
	}
	return 1
}

// keyPicker draws keys uniformly, or by Zipf's law of exponent s > 1.
func keyPicker(keys []string, s float64, rng *rand.Rand) func() string {
	if s > 1 {
		z := rand.NewZipf(rng, s, 1, uint64(len(keys)-1))
		return func() string { return keys[z.Uint64()] }
	}
	n := len(keys)
	return func() string { return keys[rng.IntN(n)] }
}

// waitUntil blocks until t or until ctx ends, and reports whether t came.
func waitUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// run issues calls back to back until the phase is done, each of batch
// checks of hits, and tallies those that start in the measured phase,
// timing one in every. It counts in a tally of its own and writes it to w
// when it returns: counters of workers side by side in memory would share
// cache lines, and every increment would pull the line from the other
// core.
func (w *tputWorker) run(ctx context.Context, check checkFunc, pick func() string, batch int, hits int64, every int, phase *atomic.Int32) {
	var t tputWorker
	defer func() { *w = t }()
	keys := make([]string, batch)
	out := make([]cluster.Decision, batch)
	untilTimed := 0
	for {
		ph := phase.Load()
		if ph == phaseDone {
			return
		}
		for i := range keys {
			keys[i] = pick()
		}
		timed := untilTimed == 0
		if timed {
			untilTimed = every
		}
		untilTimed--
		var t0 time.Time
		if timed {
			t0 = time.Now()
		}
		err := check(ctx, keys, hits, out)
		var elapsed time.Duration
		if timed {
			elapsed = time.Since(t0)
		}
		if ph != phaseMeasure {
			continue // warm-up
		}
		t.calls++
		if err != nil {
			if ctx.Err() != nil {
				return // stopped: the call was cut short, not failed
			}
			t.errors++
			if errors.Is(err, cluster.ErrOutcomeUnknown) || status.Code(err) == codes.Aborted {
				t.unknown++
			}
			if t.firstErr == nil {
				t.firstErr = err
			}
			continue
		}
		for i := range out {
			t.decisions++
			if out[i].Allowed {
				t.admitted++
			}
			if p := out[i].Path; int(p) < len(t.paths) {
				t.paths[p]++
			}
		}
		if timed {
			t.hist.record(int64(elapsed))
		}
	}
}

// logGate passes records to next until closed is set, then drops them.
type logGate struct {
	next   slog.Handler
	closed *atomic.Bool
}

func (g *logGate) Enabled(ctx context.Context, l slog.Level) bool {
	return !g.closed.Load() && g.next.Enabled(ctx, l)
}

func (g *logGate) Handle(ctx context.Context, r slog.Record) error {
	if g.closed.Load() {
		return nil
	}
	return g.next.Handle(ctx, r)
}

func (g *logGate) WithAttrs(as []slog.Attr) slog.Handler {
	return &logGate{next: g.next.WithAttrs(as), closed: g.closed}
}

func (g *logGate) WithGroup(name string) slog.Handler {
	return &logGate{next: g.next.WithGroup(name), closed: g.closed}
}

// pathUnknown marks a decision whose path the transport does not carry; it
// is counted under no path.
const pathUnknown = window.Path(math.MaxUint8)

// latencyHist is a log-linear (HDR-style) histogram of durations in
// nanoseconds. Values below 2^histSubBits ns (1.024 µs) have a bucket each;
// above, every power of two is split into 2^(histSubBits−1) equal buckets,
// so a bucket is at most 1/512 (0.2 %) of its values wide: 1 ns wide up to
// 1 µs, 1.024 µs wide just under 1 ms, 16 µs wide at 10–16 ms. Values past
// 2^histMaxBits ns (about 18 minutes) land in the last bucket; min and max
// are kept exactly. The zero value is empty and ready to use.
type latencyHist struct {
	counts   []int64
	count    int64
	sum      int64
	min, max int64
}

const (
	histSubBits = 10
	histHalf    = 1 << (histSubBits - 1)
	histMaxBits = 40
	histBuckets = 1<<histSubBits + (histMaxBits-histSubBits)*histHalf
)

// histIndex returns the bucket of v ≥ 0.
func histIndex(v int64) int {
	if v < 1<<histSubBits {
		return int(v)
	}
	msb := bits.Len64(uint64(v)) - 1
	if msb >= histMaxBits {
		return histBuckets - 1
	}
	shift := msb - (histSubBits - 1)
	sub := int(v>>shift) - histHalf
	return 1<<histSubBits + (msb-histSubBits)*histHalf + sub
}

// histRange returns the smallest value of bucket i and its width.
func histRange(i int) (lo, width int64) {
	if i < 1<<histSubBits {
		return int64(i), 1
	}
	j := i - 1<<histSubBits
	octave, sub := j/histHalf, j%histHalf+histHalf
	shift := octave + 1
	return int64(sub) << shift, int64(1) << shift
}

func (h *latencyHist) record(v int64) {
	if h.counts == nil {
		h.counts = make([]int64, histBuckets)
	}
	v = max(v, 0)
	h.counts[histIndex(v)]++
	if h.count == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.count++
	h.sum += v
}

func (h *latencyHist) merge(o *latencyHist) {
	if o.count == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]int64, histBuckets)
	}
	for i, n := range o.counts {
		h.counts[i] += n
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.count += o.count
	h.sum += o.sum
}

// quantile returns the value at quantile q in (0, 1]: the highest value of
// the bucket holding the ⌈q·count⌉-th smallest value, clamped to the
// exact min and max. An empty histogram returns 0.
func (h *latencyHist) quantile(q float64) int64 {
	if h.count == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.count)))
	rank = min(max(rank, 1), h.count)
	var seen int64
	for i, n := range h.counts {
		seen += n
		if seen >= rank {
			lo, width := histRange(i)
			return min(max(lo+width-1, h.min), h.max)
		}
	}
	return h.max
}
