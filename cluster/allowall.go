package cluster

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/counter"
)

// Check is one part of a check AllowAll decides all or nothing: hits of key
// under rule.
type Check struct {
	Rule, Key string
	Hits      int64
}

// AllowAll decides checks together, all or nothing: a request that must
// fit a burst cap and a longer limit, or several Envoy descriptors, is
// admitted only if every part is, and when one is refused nothing is
// spent. ok reports whether all were admitted; the decisions are each
// part's own, in order.
//
// Parts are decided in order, a strict part (at most one: ErrSeveralStrict)
// last. When a part is refused, the hits of those admitted before it are
// given back, as Reservation.Cancel does, and the parts after it are not
// spent: a batched one's decision answers for one hit, as a check of 0
// hits does, and a strict one's is left empty but for Limit. Peers that
// already heard of the given-back hits count them until this node admits
// past them, which errs toward refusing.
//
// Errors are those of Allow, naming the part, and ErrSeveralStrict; a part
// that fails after others were admitted has their hits given back first.
// No part is decided when one could never be (an unknown rule, a bad key or
// hits).
func (n *Node) AllowAll(ctx context.Context, checks []Check) ([]Decision, bool, error) {
	if n.isClosing.Load() {
		return nil, false, ErrClosed
	}
	strictAt := -1
	counts := make([]int64, len(checks))
	for i, c := range checks {
		t := n.replica.Table(c.Rule)
		err := n.Check(c.Rule, c.Key, c.Hits)
		if t == nil && err == nil {
			err = fmt.Errorf("%w %q", ErrUnknownRule, c.Rule) // removed by a Reload meanwhile
		}
		if err != nil {
			return nil, false, fmt.Errorf("sluice: check %d of %d: %w", i+1, len(checks), err)
		}
		r := t.Rule()
		counts[i] = r.Count
		if r.IsStrict() {
			if strictAt >= 0 {
				return nil, false, fmt.Errorf("%w: rules %q and %q", ErrSeveralStrict, checks[strictAt].Rule, c.Rule)
			}
			strictAt = i
		}
	}
	out := make([]Decision, len(checks))
	tickets := make([]counter.Ticket, len(checks))
	giveBack := func() {
		for i := range tickets {
			if tickets[i].Counted() {
				n.replica.Refund(&tickets[i], n.now())
			}
		}
	}
	refused := false
	decide := func(i int) error {
		c := checks[i]
		if refused {
			if i == strictAt {
				out[i] = Decision{Limit: counts[i]}
				return nil
			}
			return n.allow(ctx, c.Rule, c.Key, 0, nil, &out[i])
		}
		if err := n.allow(ctx, c.Rule, c.Key, c.Hits, &tickets[i], &out[i]); err != nil {
			return err
		}
		refused = !out[i].Allowed
		return nil
	}
	for i := range checks {
		if i == strictAt {
			continue
		}
		if err := decide(i); err != nil {
			giveBack()
			return out, false, fmt.Errorf("sluice: check %d of %d: %w", i+1, len(checks), err)
		}
	}
	if strictAt >= 0 {
		if err := decide(strictAt); err != nil {
			giveBack()
			return out, false, fmt.Errorf("sluice: check %d of %d: %w", strictAt+1, len(checks), err)
		}
	}
	if refused {
		giveBack()
	}
	return out, !refused, nil
}
