package strict

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// check decides one strict check: through the log when a leader answers in
// time, else as the rule's fail_mode says. The fail-mode answer comes before
// the caller's deadline (or the default strict timeout), not after it.
func (g *strictGroup) check(ctx context.Context, rule window.Rule, key string, hits int64) (window.Decision, error) {
	a := g.checkAt(ctx, rule, key, hits)
	return a.d, a.err
}

// strictAnswer is what checkAt found for one check.
type strictAnswer struct {
	d   window.Decision
	at  int64 // the log's time of a strict decision (Unix nanoseconds); 0 otherwise
	err error
	// sent marks a fail-mode answer given while the check was on its way
	// to the leader: the log may yet count it. Tests model such checks as
	// maybe applied.
	sent bool
}

// giveUpMargin is the share of a caller's remaining time kept back to
// answer by the fail mode, within [minGiveUpMargin, maxGiveUpMargin]: enough
// to decide locally and send the answer before the caller stops listening.
const (
	giveUpMargin    = 10 // percent
	minGiveUpMargin = 2 * time.Millisecond
	maxGiveUpMargin = 250 * time.Millisecond
)

// giveUpAt returns when a check must stop waiting for the leader so that its
// fail-mode answer still reaches the caller: a margin before ctx's deadline,
// or the strict timeout from now when ctx has none.
func giveUpAt(ctx context.Context, now time.Time, timeout time.Duration) time.Time {
	deadline, ok := ctx.Deadline()
	if !ok {
		return now.Add(timeout)
	}
	margin := min(max(deadline.Sub(now)*giveUpMargin/100, minGiveUpMargin), maxGiveUpMargin)
	return deadline.Add(-margin)
}

// checkAt is check with the log's time of a strict decision, and whether a
// fail-mode answer came while the check was in flight.
func (g *strictGroup) checkAt(ctx context.Context, rule window.Rule, key string, hits int64) strictAnswer {
	a := g.checkAllAt(ctx, []strictPart{{rule: rule, key: key, hits: hits}})
	out := strictAnswer{at: a.at, err: a.err, sent: a.sent}
	if a.err == nil {
		out.d = a.ds[0]
	}
	return out
}

// strictPart is one check of several decided all or nothing.
type strictPart struct {
	rule window.Rule
	key  string
	hits int64
}

// groupAnswer is what checkAllAt found for checks decided together: a
// decision per check, in order, or an error.
type groupAnswer struct {
	ds   []window.Decision
	at   int64
	err  error
	sent bool
}

// checkAllAt decides parts all or nothing, in one run of the log (each
// check but the last joined to the next) or, when no leader answers in
// time, by their fail modes.
func (g *strictGroup) checkAllAt(ctx context.Context, parts []strictPart) groupAnswer {
	return g.checkRunAt(ctx, parts, true)
}

// checkRunAt decides parts in one run of the log, all or nothing if joined,
// else each on its own; when no leader answers in time, by their fail
// modes, all or nothing if joined.
func (g *strictGroup) checkRunAt(ctx context.Context, parts []strictPart, joined bool) groupAnswer {
	wait, cancel := context.WithDeadline(ctx, giveUpAt(ctx, time.Now(), g.e.set.Timeout))
	defer cancel()
	failMode := func(sent bool) groupAnswer {
		if joined {
			ds, err := g.failModeAll(parts)
			return groupAnswer{ds: ds, err: err, sent: sent}
		}
		ds, err := g.failModeEach(parts)
		return groupAnswer{ds: ds, err: err, sent: sent}
	}
	checks := make([]*sluicev1.StrictCheck, len(parts))
	for i, pt := range parts {
		checks[i] = &sluicev1.StrictCheck{Id: g.e.self.Boot ^ g.nextID.Add(1), Rule: pt.rule.Name, Key: pt.key,
			Hits: pt.hits, WithNext: joined && i < len(parts)-1}
	}
	p := &strictPending{checks: checks, done: make(chan strictOutcome, 1)}
	for {
		changed := g.changes.changed()
		q := g.fwd
		if g.raft.State() == raft.Leader {
			q = g.lead
		} else if g.leader(wait) == "" {
			// No leader known: wait for an election, then fail over. A
			// voter's Raft reports one (changes); a node that does not
			// vote learns of it only by asking again.
			if !g.pause(wait, changed, g.isVoter()) {
				return failMode(false)
			}
			continue
		}
		select {
		case q <- p:
		case <-wait.Done():
			return failMode(false)
		}
		var out strictOutcome
		select {
		case out = <-p.done:
		case <-wait.Done():
			if p.withdraw() {
				// Still queued: it was never sent, so the fail mode answers.
				return failMode(false)
			}
			// An answer may have arrived together with the deadline.
			select {
			case out = <-p.done:
			default:
				if ctx.Err() != nil {
					return groupAnswer{err: fmt.Errorf("%w: %w", strictapi.ErrOutcomeUnknown, ctx.Err())}
				}
				// The leader has not answered in time: the caller still
				// gets the fail mode's answer, though the log may count
				// the check too.
				g.e.c.StrictInFlightFailovers.Add(int64(len(parts)))
				return failMode(true)
			}
		}
		switch {
		case out.err == nil:
			a := groupAnswer{ds: make([]window.Decision, len(parts))}
			for i, sd := range out.ds {
				d, err := fromStrict(sd)
				if errors.Is(err, counter.ErrUnknownRule) {
					// The log does not know the rule yet: the leader has
					// not taken this node's configuration. Answer as
					// without a leader.
					return failMode(false)
				}
				if err != nil {
					return groupAnswer{err: err}
				}
				a.ds[i], a.at = d, sd.GetDecidedAt()
			}
			return a
		case errors.Is(out.err, errNoLeader):
			// Nothing was appended: try again when leadership changes or
			// after the retry pause (the leader Raft names may be one that
			// gRPC cannot reach, and then no change comes), or fail over at
			// the deadline.
			if !g.pause(wait, changed, false) {
				return failMode(false)
			}
			p.done = make(chan strictOutcome, 1)
			p.state.Store(pendingQueued)
			continue
		}
		return groupAnswer{err: out.err}
	}
}

// errNoLeader means a check was not appended anywhere: safe to retry.
var errNoLeader = errors.New("no strict leader")

// fromStrict reads a decision of the log; an error is the one the deciding
// node had (strictErr).
func fromStrict(d *sluicev1.StrictDecision) (window.Decision, error) {
	if err := strictErr(d); err != nil {
		return window.Decision{}, err
	}
	return window.Decision{Allowed: d.GetAllowed(), Limit: d.GetLimit(), Remaining: d.GetRemaining(),
		ResetAfter: time.Duration(d.GetResetAfterNs()), RetryAfter: time.Duration(d.GetRetryAfterNs()),
		Path: window.PathStrict, At: d.GetDecidedAt()}, nil
}

// failMode answers a check no leader could decide in time.
func (g *strictGroup) failMode(rule window.Rule, key string, hits int64) (window.Decision, error) {
	ds, err := g.failModeAll([]strictPart{{rule: rule, key: key, hits: hits}})
	if err != nil {
		return window.Decision{}, err
	}
	return ds[0], nil
}

// failModeAll answers, all or nothing, checks no leader could decide in
// time, each by its rule's fail mode: fail_mode open admits, closed
// refuses, local decides from the node's own view. Once one is refused,
// the local checks admitted before it give their hits back and those after
// it are decided for 0 hits, as the log does with a run.
func (g *strictGroup) failModeAll(parts []strictPart) ([]window.Decision, error) {
	g.e.c.StrictFailovers.Add(int64(len(parts)))
	now := g.e.h.Now()
	ds := make([]window.Decision, len(parts))
	tks := make([]counter.Ticket, len(parts))
	refused := false
	for i, pt := range parts {
		switch pt.rule.FailMode {
		case window.FailOpen:
			ds[i] = window.Decision{Allowed: true, Limit: pt.rule.Count, Remaining: pt.rule.Count, Path: window.PathFailOpen, At: now}
		case window.FailClosed:
			ds[i] = window.Decision{Limit: pt.rule.Count, RetryAfter: g.e.set.Timeout, Path: window.PathFailClosed, At: now}
		default:
			// From the node's own view, not from zero: it holds what this
			// node and the peers it reaches admitted outside the log, and
			// the counts the rule had when it turned strict.
			hits := pt.hits
			if refused {
				hits = 0
			}
			d, tk, err := g.e.replica.Reserve(now, pt.rule.Name, pt.key, hits)
			if err != nil {
				g.giveBack(ds, tks, now)
				return nil, err
			}
			d.Path = window.PathFailLocal
			ds[i], tks[i] = d, tk
		}
		refused = refused || (!ds[i].Allowed && !pt.rule.Shadow) // a shadow refusal admits
	}
	if refused {
		g.giveBack(ds, tks, now)
		return ds, nil
	}
	for i := range tks {
		if tks[i].Counted() {
			g.e.h.MarkChanged()
			g.outside.Store(true)
			break
		}
	}
	return ds, nil
}

// failModeEach answers checks no leader could decide in time each on its
// own, by its rule's fail mode, in order: a refusal gives nothing back.
func (g *strictGroup) failModeEach(parts []strictPart) ([]window.Decision, error) {
	ds := make([]window.Decision, len(parts))
	for i := range parts {
		d, err := g.failModeAll(parts[i : i+1])
		if err != nil {
			return nil, err
		}
		ds[i] = d[0]
	}
	return ds, nil
}

// giveBack refunds the hits tks counted, at now, into ds's Remaining.
func (g *strictGroup) giveBack(ds []window.Decision, tks []counter.Ticket, now int64) {
	for i := range tks {
		if tks[i].Counted() {
			ds[i].Remaining = min(ds[i].Remaining+g.e.replica.Refund(&tks[i], now), ds[i].Limit)
		}
	}
}
