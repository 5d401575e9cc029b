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
// A rule with several limits (window.Rule.Also) is one part per limit.
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
	return n.allowAll(ctx, checks, nil)
}

// allowAll is AllowAll. A check under a rule with several limits is
// decided as one check per part (window.Rule.Parts), and its decision
// combines theirs. When tickets is not nil, an admitted check's tickets,
// one per part decided, go there, for a reservation to give back.
func (n *Node) allowAll(ctx context.Context, checks []Check, tickets *[]counter.Ticket) ([]Decision, bool, error) {
	x := n.index.Load()
	if n.isClosing.Load() {
		for _, c := range checks {
			n.countError(x, c.Rule)
		}
		return nil, false, ErrClosed
	}
	flat, of := checks, []int(nil)
	// isPart says which of flat are parts of a rule with several limits:
	// their check is counted whole, here, not part by part.
	var isPart []bool
	if x.multi {
		flat, of = nil, make([]int, 0, len(checks))
		for i, c := range checks {
			parts := x.parts[c.Rule]
			if parts == nil {
				flat, of, isPart = append(flat, c), append(of, i), append(isPart, false)
				continue
			}
			for _, p := range parts {
				flat, of = append(flat, Check{Rule: p, Key: c.Key, Hits: c.Hits}), append(of, i)
				isPart = append(isPart, true)
			}
		}
	}
	which := func(i int) int {
		if of == nil {
			return i + 1
		}
		return of[i] + 1
	}
	part := func(i int) bool { return isPart != nil && isPart[i] }
	strictAt := -1
	counts := make([]int64, len(flat))
	for i, c := range flat {
		t := n.replica.Table(c.Rule)
		err := n.replica.Check(c.Rule, c.Key, c.Hits)
		if t == nil && err == nil {
			err = fmt.Errorf("%w %q", ErrUnknownRule, c.Rule) // removed by a Reload meanwhile
		}
		if err != nil {
			n.countError(x, checks[which(i)-1].Rule)
			return nil, false, fmt.Errorf("sluice: check %d of %d: %w", which(i), len(checks), err)
		}
		r := t.Rule()
		counts[i] = r.Count
		if r.IsStrict() {
			if strictAt >= 0 {
				n.countError(x, checks[which(i)-1].Rule)
				return nil, false, fmt.Errorf("%w: rules %q and %q", ErrSeveralStrict, flat[strictAt].Rule, c.Rule)
			}
			strictAt = i
		}
	}
	ds := make([]Decision, len(flat))
	tks := make([]counter.Ticket, len(flat))
	giveBack := func() {
		for i := range tks {
			if tks[i].Counted() {
				// What the part has left is as before it was spent.
				ds[i].Remaining = min(ds[i].Remaining+n.replica.Refund(&tks[i], n.now()), ds[i].Limit)
			}
		}
	}
	refused := false
	decide := func(i int) error {
		c := flat[i]
		if refused {
			if i == strictAt {
				ds[i] = Decision{Limit: counts[i]}
				return nil
			}
			var probe counter.Ticket // a ticket, so that allow decides the part itself
			return n.allow(ctx, c.Rule, c.Key, 0, &probe, &ds[i], part(i))
		}
		if err := n.allow(ctx, c.Rule, c.Key, c.Hits, &tks[i], &ds[i], part(i)); err != nil {
			return err
		}
		refused = !ds[i].Allowed
		return nil
	}
	for i := range flat {
		if i == strictAt {
			continue
		}
		if err := decide(i); err != nil {
			giveBack()
			if part(i) {
				n.countError(x, checks[which(i)-1].Rule)
			}
			return nil, false, fmt.Errorf("sluice: check %d of %d: %w", which(i), len(checks), err)
		}
	}
	if strictAt >= 0 {
		if err := decide(strictAt); err != nil {
			giveBack()
			return nil, false, fmt.Errorf("sluice: check %d of %d: %w", which(strictAt), len(checks), err)
		}
	}
	if refused {
		giveBack()
	} else if tickets != nil {
		*tickets = tks
	}
	if of == nil {
		return ds, !refused, nil
	}
	out := make([]Decision, len(checks))
	for i, from := 0, 0; i < len(checks); i++ {
		to := from
		for to < len(flat) && of[to] == i {
			to++
		}
		out[i] = combine(ds[from:to])
		if part(from) {
			n.countCheck(x, checks[i].Rule, &out[i])
		}
		from = to
	}
	return out, !refused, nil
}
