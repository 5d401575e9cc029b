package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// Limiter is a handle on one of a node's rules, shaped like
// golang.org/x/time/rate's Limiter: Allow and AllowN decide at once, Wait
// blocks until the hits are admitted, and Reserve takes hits that can be
// given back. Every method takes the key the rule counts for.
//
// A Limiter names its rule, which the node looks up on every call as
// Node.Allow does, so the handle follows a Reload: a rule whose count or
// sync changed is checked as it now is, and a rule that Reload removed
// makes every call fail with ErrUnknownRule (until a Reload brings it
// back). A Limiter is safe for concurrent use and holds nothing to release.
type Limiter struct {
	n    *Node
	rule string
}

// Limiter returns the handle on the named rule. It fails with ErrClosed
// once the node is closing, and with ErrUnknownRule when the node has no
// such rule: a misspelt name is found here, once, rather than on every
// check.
func (n *Node) Limiter(rule string) (*Limiter, error) {
	if n.isClosing.Load() {
		return nil, ErrClosed
	}
	if _, part := window.PartOf(rule); part || n.replica.Table(rule) == nil {
		// A part of a rule with several limits has a table, but is no
		// rule: see partRule.
		return nil, fmt.Errorf("sluice: limiter: %w", counter.UnknownRule(rule))
	}
	return &Limiter{n: n, rule: rule}, nil
}

// Name returns the name of the handle's rule.
func (l *Limiter) Name() string { return l.rule }

// Rule returns the handle's rule as the node has it now, and false if a
// Reload has removed it.
func (l *Limiter) Rule() (window.Rule, bool) {
	r, ok := l.n.index.Load().rules[l.rule]
	return r, ok
}

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	// Not a call of AllowN: this way both inline into their callers.
	var d Decision
	err := l.n.allow(ctx, l.rule, key, 1, nil, &d, false)
	return d, err
}

// AllowN checks n hits (0 asks without spending) for key, records them if
// admitted, and returns the decision; it is Node.Allow for the handle's
// rule, with the same waits and errors (see Node.Allow).
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	var d Decision
	err := l.n.allow(ctx, l.rule, key, n, nil, &d, false)
	return d, err
}

// minRetry is the least Wait sleeps between two checks, so that a refusal
// that names no wait (a sync round due now, say) is not asked again in a
// tight loop.
const minRetry = time.Millisecond

// Wait blocks until n hits for key are admitted (and records them), ctx
// ends or the node closes. After each refusal it sleeps for the decision's
// RetryAfter, the moment the same hits would fit if nothing else arrives,
// and asks again: others may take the room first.
//
// It returns nil once admitted. It fails at once, having waited for
// nothing, with ErrHitsOverCount when n exceeds the rule's count (no wait
// could ever admit it) and with the other errors of AllowN; with ctx's
// error when ctx ends, or at once with an error matching
// context.DeadlineExceeded when ctx's deadline comes before the moment the
// hits could fit, as golang.org/x/time/rate's Wait does; and with ErrClosed
// when the node closes. A Wait that fails has spent nothing.
//
// Wait sleeps on the wall clock: a node whose Config.Now is a fake clock
// must have it move for a refused Wait to end.
func (l *Limiter) Wait(ctx context.Context, key string, n int64) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		d, err := l.AllowN(ctx, key, n)
		if err != nil {
			return err
		}
		if d.Allowed {
			return nil
		}
		wait := max(d.RetryAfter, minRetry)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return fmt.Errorf("sluice: wait for %d hits of rule %q: they fit in %v, past the context's deadline: %w",
				n, l.rule, wait, context.DeadlineExceeded)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.n.done:
			return ErrClosed
		}
	}
}

// Reserve checks n hits for key as AllowN does and returns them as a
// Reservation: when admitted, the hits are spent now, and the
// reservation's Cancel gives them back if the work they were taken for is
// not done. Unlike golang.org/x/time/rate, a refused reservation holds
// nothing for later: its Decision says when to come back.
func (l *Limiter) Reserve(ctx context.Context, key string, n int64) (*Reservation, error) {
	r := &Reservation{n: l.n}
	if x := l.n.index.Load(); x.multi && x.parts[l.rule] != nil {
		ds, _, err := l.n.allowAll(ctx, []Check{{Rule: l.rule, Key: key, Hits: n}}, &r.parts)
		if err != nil {
			return nil, err
		}
		r.d = ds[0]
		return r, nil
	}
	if err := l.n.allow(ctx, l.rule, key, n, &r.ticket, &r.d, false); err != nil {
		return nil, err
	}
	return r, nil
}
