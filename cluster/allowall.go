package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
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
// Batched parts are decided in order, then the strict ones together, in
// one entry of the strict log, which decides them all or nothing itself.
// When a part is refused, the hits of those admitted before it are given
// back, as Reservation.Cancel does, and the parts after it are not spent:
// a batched one's decision answers for one hit, as a check of 0 hits does,
// and so does a strict one's the log decided; strict parts not sent to the
// log, because a batched part was refused, are left empty but for Limit.
// Peers that already heard of the given-back hits count them until this
// node admits past them, which errs toward refusing. A part refused under
// a rule in shadow mode is admitted (Decision.Shadowed) and refuses no
// other part.
//
// Errors are those of Allow, naming the part; a part that fails after
// others were admitted has their hits given back first. No part is decided
// when one could never be (an unknown rule, a bad key or hits).
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
	var strictAt []int // the strict parts, decided last and together
	counts := make([]int64, len(flat))
	for i, c := range flat {
		t := n.replica.Table(c.Rule)
		err := n.replica.Check(c.Rule, c.Key, c.Hits)
		if t == nil && err == nil {
			err = counter.UnknownRule(c.Rule) // removed by a Reload meanwhile
		}
		if err != nil {
			n.countError(x, checks[which(i)-1].Rule)
			return nil, false, fmt.Errorf("sluice: check %d of %d: %w", which(i), len(checks), err)
		}
		r := t.Rule()
		counts[i] = r.Count
		if r.IsStrict() {
			strictAt = append(strictAt, i)
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
			var probe counter.Ticket // a ticket, so that allow decides the part itself
			return n.allow(ctx, c.Rule, c.Key, 0, &probe, &ds[i], part(i))
		}
		if err := n.allow(ctx, c.Rule, c.Key, c.Hits, &tks[i], &ds[i], part(i)); err != nil {
			return err
		}
		refused = !ds[i].Allowed
		return nil
	}
	strict := func(i int) bool { return len(strictAt) > 0 && slices.Contains(strictAt, i) }
	for i := range flat {
		if strict(i) {
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
	switch {
	case len(strictAt) == 0:
	case refused:
		for _, i := range strictAt {
			ds[i] = Decision{Limit: counts[i]}
		}
	case len(strictAt) == 1:
		if err := decide(strictAt[0]); err != nil {
			giveBack()
			if part(strictAt[0]) {
				n.countError(x, checks[which(strictAt[0])-1].Rule)
			}
			return nil, false, fmt.Errorf("sluice: check %d of %d: %w", which(strictAt[0]), len(checks), err)
		}
	default:
		at, err := n.allowStrict(ctx, x, flat, strictAt, part, ds, tks)
		if err != nil {
			giveBack()
			for _, i := range strictAt {
				if part(i) && (i == 0 || of[i-1] != of[i]) {
					n.countError(x, checks[which(i)-1].Rule)
				}
			}
			return nil, false, fmt.Errorf("sluice: check %d of %d: %w", which(at), len(checks), err)
		}
		for _, i := range strictAt {
			refused = refused || !ds[i].Allowed
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

// allowStrict decides the strict checks of flat at idx all or nothing, in
// one run of the strict log, into ds, and counts those that are no part of
// a rule with several limits (allowAll counts those whole). A strict mode
// that knows none of them as strict (a reload turning them batched is
// under way) leaves them to the batched path, in order, with tickets in
// tks, as allowAll decides batched parts. The error comes with the index in
// flat of the check it is about.
func (n *Node) allowStrict(ctx context.Context, x *ruleIndex, flat []Check, idx []int, part func(int) bool,
	ds []Decision, tks []counter.Ticket) (int, error) {
	cs := make([]strictapi.Check, len(idx))
	for j, i := range idx {
		cs[j] = strictapi.Check{Rule: flat[i].Rule, Key: flat[i].Key, Hits: flat[i].Hits}
	}
	own := n.ownNow()
	got, ok, err := n.strict.AllowAll(ctx, cs)
	if !ok {
		refused := false
		for _, i := range idx {
			c, hits := flat[i], flat[i].Hits
			if refused {
				hits = 0
			}
			var probe counter.Ticket
			tk := &tks[i]
			if refused {
				tk = &probe
			}
			if err := n.allow(ctx, c.Rule, c.Key, hits, tk, &ds[i], part(i)); err != nil {
				return i, err
			}
			refused = refused || !ds[i].Allowed
		}
		return 0, nil
	}
	if err != nil {
		for _, i := range idx {
			if !part(i) {
				n.countStrict(x, flat[i].Rule, own, nil, err)
			}
		}
		return idx[0], err
	}
	for j, i := range idx {
		ds[i].from(&got[j])
		if x.anyShadow {
			n.shadowed(x, flat[i].Rule, &ds[i])
		}
		if !part(i) {
			n.countStrict(x, flat[i].Rule, own, &ds[i], nil)
		}
	}
	return 0, nil
}
