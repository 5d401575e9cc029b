package cluster

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// MaxBatchChecks is the most checks one CheckBatch request may carry: a
// larger batch is refused whole, InvalidArgument, before any is decided.
const MaxBatchChecks = 1000

// limiterService serves the sluice.v1.Limiter gRPC API from a node.
type limiterService struct {
	sluicev1.UnimplementedLimiterServer
	node *Node
}

// NewLimiterService returns the sluice.v1.Limiter gRPC service answering
// checks from n and listing its rules. Register it on a grpc.Server with
// sluicev1.RegisterLimiterServer.
//
// Errors of Check and CheckBatch are gRPC statuses: NotFound for an unknown
// rule; InvalidArgument for a rule name or key that is not valid UTF-8, an
// empty or over-long key, a rule name longer than any rule's, negative hits
// or hits above the rule's count, and a batch of more than MaxBatchChecks
// checks; Unavailable once the node is closed. Messages name the field and
// the offending value. Rules does not fail.
func NewLimiterService(n *Node) sluicev1.LimiterServer {
	return &limiterService{node: n}
}

// Check decides one check.
func (s *limiterService) Check(ctx context.Context, req *sluicev1.CheckRequest) (*sluicev1.CheckResponse, error) {
	if req == nil {
		return nil, statusFor(errEmptyCheck, "")
	}
	if err := partRule(req.GetRule()); err != nil {
		return nil, s.refuse(err, "")
	}
	d, err := s.node.Allow(ctx, req.GetRule(), req.GetKey(), req.GetHits())
	if err != nil {
		return nil, s.refuse(err, "")
	}
	return decisionToProto(d), nil
}

// refuse is statusFor, counting a check refused for the length of its key
// or rule name (Metrics.RefusedKeyLength, RefusedRuleLength).
func (s *limiterService) refuse(err error, prefix string) error {
	switch {
	case errors.Is(err, counter.ErrKeyTooLong):
		s.node.metrics.RefusedKeyLength.Add(1)
	case errors.Is(err, counter.ErrRuleTooLong):
		s.node.metrics.RefusedRuleLength.Add(1)
	}
	return statusFor(err, prefix)
}

// partRule is ErrUnknownRule for the name of a part of a rule with
// several limits ("api#2"), else nil. The counters hold each part as a
// table of its own, under that name, but a check under a rule is a check
// under all its parts: one that named a part alone would pass the rule's
// other limits by.
func partRule(rule string) error {
	if _, ok := window.PartOf(rule); ok {
		return counter.UnknownRule(rule)
	}
	return nil
}

// CheckBatch validates every check first, so an invalid one fails the batch
// before anything is spent, then decides them in order.
func (s *limiterService) CheckBatch(ctx context.Context, req *sluicev1.CheckBatchRequest) (*sluicev1.CheckBatchResponse, error) {
	checks := req.GetChecks()
	if len(checks) > MaxBatchChecks {
		s.node.metrics.RefusedBatchSize.Add(1)
		return nil, status.Errorf(codes.InvalidArgument, "checks: %d checks in a batch, at most %d", len(checks), MaxBatchChecks)
	}
	for i, c := range checks {
		err := errEmptyCheck
		if c != nil {
			if err = partRule(c.GetRule()); err == nil {
				err = s.node.Check(c.GetRule(), c.GetKey(), c.GetHits())
			}
		}
		if err != nil {
			return nil, s.refuse(err, fmt.Sprintf("checks[%d]: ", i))
		}
	}
	// The results and their durations come in two allocations, not three
	// a check: a batch is how a busy client saves per-check costs.
	results := make([]sluicev1.CheckResponse, len(checks))
	durations := make([]durationpb.Duration, 2*len(checks))
	out := &sluicev1.CheckBatchResponse{Results: make([]*sluicev1.CheckResponse, len(checks))}
	strict, err := s.checkStrictTogether(ctx, checks)
	if err != nil {
		return nil, err
	}
	for i, c := range checks {
		d, ok := strict[i]
		if !ok {
			if d, err = s.node.Allow(ctx, c.GetRule(), c.GetKey(), c.GetHits()); err != nil {
				return nil, s.refuse(err, fmt.Sprintf("checks[%d]: ", i))
			}
		}
		out.Results[i] = fillResponse(&results[i], d, durations[2*i:2*i+2])
	}
	return out, nil
}

// checkStrictTogether decides a batch's checks under strict rules with one
// limit in one entry of the log, each on its own and in order, when there
// are several: decided one by one, each would wait for a commit of its
// own. Checks under other rules do not share their counts, so deciding the
// strict ones first changes no decision. It returns the decisions by index
// in the batch, none when the batch has fewer than two such checks or the
// log does not decide them all.
func (s *limiterService) checkStrictTogether(ctx context.Context, checks []*sluicev1.CheckRequest) (map[int]Decision, error) {
	if s.node.strict == nil || len(checks) < 2 {
		return nil, nil
	}
	x := s.node.index.Load()
	var idx []int
	for i, c := range checks {
		if x.strictSingle(c.GetRule()) {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return nil, nil
	}
	cs := make([]strictapi.Check, len(idx))
	for k, i := range idx {
		cs[k] = strictapi.Check{Rule: checks[i].GetRule(), Key: checks[i].GetKey(), Hits: checks[i].GetHits()}
	}
	ds := make([]Decision, len(idx))
	ok, err := s.node.allowStrictEach(ctx, cs, ds)
	if err != nil {
		return nil, s.refuse(err, fmt.Sprintf("checks[%d]: ", idx[0]))
	}
	if !ok {
		return nil, nil
	}
	out := make(map[int]Decision, len(idx))
	for k, i := range idx {
		out[i] = ds[k]
	}
	return out, nil
}

// setDuration sets p to d, as durationpb.New does, and returns it.
func setDuration(p *durationpb.Duration, d time.Duration) *durationpb.Duration {
	p.Seconds, p.Nanos = int64(d/time.Second), int32(d%time.Second)
	return p
}

// Rules lists the node's rules and the hash of them it gossips.
func (s *limiterService) Rules(context.Context, *sluicev1.RulesRequest) (*sluicev1.RulesResponse, error) {
	rules, hash := s.node.rulesAndHash()
	out := &sluicev1.RulesResponse{Node: s.node.Name(), RulesHash: hash, Rules: make([]*sluicev1.Rule, 0, len(rules))}
	for _, r := range rules {
		out.Rules = append(out.Rules, ruleToProto(r))
	}
	return out, nil
}

// ruleToProto converts a rule to its wire form; a strict rule has no sync
// interval on the wire, only strict set.
func ruleToProto(r window.Rule) *sluicev1.Rule {
	p := &sluicev1.Rule{Name: r.Name, Count: r.Count, Window: durationpb.New(r.Window), WindowType: r.Type.String(),
		Strict: r.IsStrict(), Allocation: r.Allocation.String(), FailMode: r.FailMode.String(), Shadow: r.Shadow}
	for _, l := range r.Also {
		p.Limits = append(p.Limits, &sluicev1.Limit{Count: l.Count, Window: durationpb.New(l.Window), WindowType: l.Type.String()})
	}
	if !p.Strict {
		p.SyncInterval = durationpb.New(r.SyncInterval)
	}
	return p
}

// errEmptyCheck is a nil entry in a batch, which only an in-process caller
// can send.
var errEmptyCheck = errors.New("check must not be empty")

// statusFor maps an error from Node.Allow to a gRPC status whose message is
// prefix and the error text, which names the field and value.
func statusFor(err error, prefix string) error {
	code := codes.Internal
	switch {
	case errors.Is(err, counter.ErrRuleNotUTF8), errors.Is(err, counter.ErrRuleTooLong):
		// Before ErrUnknownRule, which they match as well: the name is
		// malformed, not misspelt.
		code = codes.InvalidArgument
	case errors.Is(err, counter.ErrUnknownRule):
		code = codes.NotFound
	case errors.Is(err, counter.ErrEmptyKey), errors.Is(err, counter.ErrKeyTooLong),
		errors.Is(err, counter.ErrKeyNotUTF8), errors.Is(err, counter.ErrNegativeHits),
		errors.Is(err, counter.ErrHitsOverCount), errors.Is(err, errEmptyCheck):
		code = codes.InvalidArgument
	case errors.Is(err, ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, ErrOutcomeUnknown):
		// Not a failure of the server: the log may or may not have spent
		// the check, and only the caller knows whether to retry.
		code = codes.Aborted
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = status.FromContextError(err).Code()
	}
	return status.Error(code, prefix+err.Error())
}

// decisionToProto converts a decision to its wire form.
func decisionToProto(d Decision) *sluicev1.CheckResponse {
	return fillResponse(&sluicev1.CheckResponse{}, d, make([]durationpb.Duration, 2))
}

// fillResponse sets r to decision d, its durations in durs (two), and
// returns it.
func fillResponse(r *sluicev1.CheckResponse, d Decision, durs []durationpb.Duration) *sluicev1.CheckResponse {
	r.Allowed, r.Limit, r.Remaining, r.Path, r.Shadowed = d.Allowed, d.Limit, d.Remaining, d.Path.String(), d.Shadowed
	r.ResetAfter, r.RetryAfter = setDuration(&durs[0], d.ResetAfter), setDuration(&durs[1], d.RetryAfter)
	return r
}
