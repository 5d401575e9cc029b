package envoyrls

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/cluster"
)

// The response headers' names by default, envoyproxy/ratelimit's
// (LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER).
const (
	DefaultHeaderLimit     = "RateLimit-Limit"
	DefaultHeaderRemaining = "RateLimit-Remaining"
	DefaultHeaderReset     = "RateLimit-Reset"
)

// Options tune a Server. The zero value answers as envoyproxy/ratelimit
// does by default.
type Options struct {
	// ResponseHeaders adds the headers HeaderLimit, HeaderRemaining and
	// HeaderReset to every response (response_headers_to_add), for the
	// descriptor closest to its limit, as envoyproxy/ratelimit does with
	// LIMIT_RESPONSE_HEADERS_ENABLED. Off by default, as there. (Envoy can
	// also make x-ratelimit-* headers itself from the descriptor statuses:
	// enable_x_ratelimit_headers in its rate limit filter.)
	ResponseHeaders bool
	// HeaderLimit, HeaderRemaining and HeaderReset name the headers; empty
	// is the default name.
	HeaderLimit, HeaderRemaining, HeaderReset string
	// Logger receives a debug line for each shadow_mode descriptor over its
	// limit, and a warning when a shadow_mode check fails; default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock a status's duration_until_reset is measured on when
	// no decision says when it was made; default time.Now.
	Now func() time.Time
}

// Server serves envoy.service.ratelimit.v3.RateLimitService from a node.
// Each request is decided through one Node.AllowAll over the descriptors a
// counted limit matches, all or nothing: when one is over its limit, none
// spends. Register it on a grpc.Server with Register.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	node    *cluster.Node
	limits  atomic.Pointer[Limits]
	opts    Options
	metrics counters
}

// NewServer returns a Server answering for the domains of l from n, whose
// rules must hold l's rules (Limits.AddTo).
func NewServer(n *cluster.Node, l *Limits, o Options) *Server {
	if o.HeaderLimit == "" {
		o.HeaderLimit = DefaultHeaderLimit
	}
	if o.HeaderRemaining == "" {
		o.HeaderRemaining = DefaultHeaderRemaining
	}
	if o.HeaderReset == "" {
		o.HeaderReset = DefaultHeaderReset
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{node: n, opts: o}
	s.SetLimits(l)
	return s
}

// Register registers the service on r. On a node's server (the
// registrar Config.GRPCServices are given), a request whose descriptor
// entries are not valid UTF-8, which Envoy sends as its headers hold them,
// is decoded all the same (cluster.AcceptInvalidUTF8) and its descriptors
// counted (see ShouldRateLimit): refused undecoded, as protobuf-go would,
// it would fail the whole call, and Envoy would apply failure_mode_deny,
// by default admitting the request with none of its limits counted.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	cluster.AcceptInvalidUTF8(r, &rlsv3.RateLimitRequest{})
	rlsv3.RegisterRateLimitServiceServer(r, s)
}

// SetLimits replaces the domains the server answers for (a config reload).
// Reload the node's rules first, so that every rule l names exists.
// Nil answers for no domain.
func (s *Server) SetLimits(l *Limits) {
	if l == nil {
		l = &Limits{}
	}
	s.limits.Store(l)
}

// MaxDescriptors is the most descriptors one request may carry: each is a
// check, and a request is decided all or nothing, as a CheckBatch of at
// most cluster.MaxBatchChecks checks is. Envoy sends one per rate limit
// action of a route.
const MaxDescriptors = cluster.MaxBatchChecks

// part is one descriptor of a request: the limit it matched (nil for none),
// the key it counts under and its hits.
type part struct {
	lim  *limit
	key  string
	hits uint64
}

// ShouldRateLimit decides a request. A descriptor no limit matches, in a
// domain or not, is OK, as are unlimited ones; the overall code is
// OVER_LIMIT when a descriptor not in shadow mode is. Each descriptor's
// cost is its hits_addend, else the request's, else 1. An entry whose key
// or value is not valid UTF-8 matches as its bytes do (a file's keys and
// values are UTF-8, so only a descriptor with no value or a wildcard can
// match one) and is counted under a key made UTF-8 and unique by a hash.
//
// Errors are gRPC statuses: InvalidArgument for an empty domain or
// descriptors list, more than MaxDescriptors descriptors, and for what sluice does not implement (a descriptor's
// limit override or is_negative_hits), naming the field; Unavailable while
// the node closes or its rules are being reloaded; FailedPrecondition for
// a request that matches more than one strict limit; Aborted when a strict
// check's outcome is unknown; Internal otherwise. Envoy's failure_mode_deny
// decides what an error means for the request.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp, err := s.decide(ctx, req)
	switch {
	case err != nil:
		s.metrics.errors.Add(1)
	case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		s.metrics.overLimit.Add(1)
	default:
		s.metrics.ok.Add(1)
	}
	return resp, err
}

func (s *Server) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "domain: must not be empty")
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return nil, status.Error(codes.InvalidArgument, "descriptors: must not be empty; a request needs at least one descriptor")
	}
	if len(descs) > MaxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "descriptors: %d descriptors in a request, at most %d", len(descs), MaxDescriptors)
	}
	var root *tree
	if d := s.limits.Load().domains[req.GetDomain()]; d != nil {
		root = d.root
	}
	parts := make([]part, len(descs))
	replacing := map[string]bool{}
	for i, d := range descs {
		if d.GetLimit() != nil {
			return nil, status.Errorf(codes.InvalidArgument,
				"descriptors[%d].limit: limit overrides are not supported by sluice: its limits are rules every node shares; remove the route's limit override", i)
		}
		if d.GetIsNegativeHits() {
			return nil, status.Errorf(codes.InvalidArgument, "descriptors[%d].is_negative_hits: not supported by sluice", i)
		}
		hits := uint64(max(1, req.GetHitsAddend()))
		if h := d.GetHitsAddend(); h != nil {
			hits = h.GetValue()
		}
		lim, key := root.match(d.GetEntries())
		parts[i] = part{lim: lim, key: key, hits: hits}
		if lim != nil {
			for _, r := range lim.replaces {
				replacing[r] = true
			}
		}
	}
	// replaces: a limit named by another matched limit's replaces is not
	// applied, as if it had not matched (envoyproxy/ratelimit's rule; an
	// unlimited limit replaces others but is not replaced).
	for i := range parts {
		if l := parts[i].lim; l != nil && !l.unlimited && l.name != "" && replacing[l.name] {
			parts[i].lim = nil
		}
	}

	statuses := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(parts))
	var enforced, shadow []int // parts a rule counts
	over := false              // an enforced part is over whatever the counts: the request is refused
	selfOver := make([]bool, len(parts))
	for i, p := range parts {
		switch l := p.lim; {
		case l == nil:
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		case l.unlimited:
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK,
				LimitRemaining: math.MaxUint32}
		case p.hits > uint64(l.perUnit):
			// requests_per_unit 0, or more hits than the limit: over
			// before anything is counted.
			selfOver[i] = true
			over = over || !l.shadow
		case l.shadow:
			shadow = append(shadow, i)
		default:
			enforced = append(enforced, i)
		}
	}

	checks := make([]cluster.Check, len(enforced))
	for j, i := range enforced {
		checks[j] = cluster.Check{Rule: parts[i].lim.rule, Key: parts[i].key, Hits: int64(parts[i].hits)}
		if over {
			checks[j].Hits = 0 // the request is refused: ask, spend nothing
		}
	}
	ok := true
	if len(checks) > 0 {
		decisions, all, err := s.node.AllowAll(ctx, checks)
		if err != nil {
			return nil, statusOf(err)
		}
		ok = all
		for j, i := range enforced {
			d := decisions[j]
			remaining := d.Remaining
			if !all && d.Allowed && checks[j].Hits > 0 {
				// Admitted, then given back when another part was refused.
				remaining = min(d.Limit, remaining+checks[j].Hits)
			}
			statuses[i] = s.status(parts[i].lim, d, d.Allowed, remaining)
		}
	}
	admitted := ok && !over

	// Shadow mode: counted as if enforced, but only when the request goes
	// on; never a reason to refuse it.
	for _, i := range shadow {
		p := parts[i]
		hits := int64(p.hits)
		if !admitted {
			hits = 0
		}
		d, err := s.node.Allow(ctx, p.lim.rule, p.key, hits)
		if err != nil {
			s.opts.Logger.Warn("envoy: shadow_mode check failed", "domain", req.GetDomain(),
				"descriptor", p.lim.descriptor, "key", p.key, "err", err)
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK,
				CurrentLimit: currentLimit(p.lim)}
			continue
		}
		statuses[i] = s.status(p.lim, d, d.Allowed, d.Remaining)
		if !d.Allowed {
			s.shadowOver(req.GetDomain(), p)
			statuses[i].Code = rlsv3.RateLimitResponse_OK
		}
	}
	for i, p := range parts {
		if !selfOver[i] {
			continue
		}
		statuses[i] = s.status(p.lim, cluster.Decision{Limit: int64(p.lim.perUnit)}, false, 0)
		if p.lim.shadow {
			s.shadowOver(req.GetDomain(), p)
			statuses[i].Code = rlsv3.RateLimitResponse_OK
		}
	}

	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: statuses}
	if !admitted {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if s.opts.ResponseHeaders {
		resp.ResponseHeadersToAdd = s.headers(statuses)
	}
	return resp, nil
}

// shadowOver records a shadow_mode descriptor over its limit.
func (s *Server) shadowOver(domain string, p part) {
	s.metrics.shadowOverLimit.Add(1)
	s.opts.Logger.Debug("envoy: shadow_mode descriptor over its limit; admitted", "domain", domain,
		"descriptor", p.lim.descriptor, "key", p.key, "code", rlsv3.RateLimitResponse_OVER_LIMIT.String())
}

// currentLimit is a status's current_limit: the limit as the file states
// it. Every limit of the format is a whole unit, so none is approximated.
func currentLimit(l *limit) *rlsv3.RateLimitResponse_RateLimit {
	return &rlsv3.RateLimitResponse_RateLimit{Name: l.name, RequestsPerUnit: l.perUnit, Unit: l.unit}
}

// status is a descriptor's status from its decision: the code, the limit,
// what is left (0 when over) and how long until the window resets: for a
// fixed window, until its end, as envoyproxy/ratelimit says; for a sliding
// one, until the whole limit is free again, or for a refusal until the
// same hits fit.
func (s *Server) status(l *limit, d cluster.Decision, allowed bool, remaining int64) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: currentLimit(l)}
	if !allowed {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		remaining = 0
	}
	st.LimitRemaining = uint32(min(max(remaining, 0), math.MaxUint32))
	var reset time.Duration
	switch {
	case l.fixed || l.rule == "":
		at := d.At()
		if at.IsZero() {
			at = s.opts.Now()
		}
		w := l.window.Nanoseconds()
		reset = time.Duration(w - at.UnixNano()%w)
	case !allowed:
		reset = d.RetryAfter
	default:
		reset = d.ResetAfter
	}
	st.DurationUntilReset = durationpb.New(reset)
	return st
}

// headers are the response headers for the status closest to its limit,
// chosen as envoyproxy/ratelimit chooses: the fewest remaining, a
// descriptor over its limit above all.
func (s *Server) headers(statuses []*rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	var pick *rlsv3.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for _, st := range statuses {
		if st.CurrentLimit != nil && st.LimitRemaining < least {
			pick, least = st, st.LimitRemaining
		}
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			pick, least = st, 0
		}
	}
	if pick == nil {
		return nil
	}
	reset := pick.GetDurationUntilReset().AsDuration()
	return []*corev3.HeaderValue{
		{Key: s.opts.HeaderLimit, Value: strconv.FormatUint(uint64(pick.CurrentLimit.RequestsPerUnit), 10)},
		{Key: s.opts.HeaderRemaining, Value: strconv.FormatUint(uint64(pick.LimitRemaining), 10)},
		{Key: s.opts.HeaderReset, Value: strconv.FormatInt(int64((reset+time.Second-1)/time.Second), 10)},
	}
}
