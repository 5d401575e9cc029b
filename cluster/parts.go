package cluster

import (
	"context"

	"github.com/sluicehq/sluice/window"
)

// ruleIndex is what a check needs to know of the node's rules beyond their
// counters: which hold several limits, which are in shadow mode, and where
// the checks their tables do not tally are counted. It is replaced whole at
// Start and Reload.
type ruleIndex struct {
	order  []window.Rule          // as given, in order
	rules  map[string]window.Rule // as given, extra limits included
	parts  map[string][]string    // names of the parts of rules with extra limits
	shadow map[string]bool
	// multi and anyShadow say whether any rule has extra limits or is in
	// shadow mode: a check reads them, not the maps, when none is.
	multi, anyShadow bool
	// counts are, by rule, its checks counted by the node rather than its
	// table: strict paths, errors, and rules with several limits.
	counts map[string]*ruleCounts
}

// newRuleIndex indexes rules; a rule prev also held keeps its counts, so
// that its metrics only grow across a reload.
func newRuleIndex(rules []window.Rule, prev *ruleIndex) *ruleIndex {
	x := &ruleIndex{order: rules, rules: make(map[string]window.Rule, len(rules)), parts: map[string][]string{},
		shadow: map[string]bool{}, counts: make(map[string]*ruleCounts, len(rules))}
	for _, r := range rules {
		x.rules[r.Name] = r
		if prev != nil && prev.counts[r.Name] != nil {
			x.counts[r.Name] = prev.counts[r.Name]
		} else {
			x.counts[r.Name] = &ruleCounts{}
		}
		if len(r.Also) > 0 {
			for _, p := range r.Parts() {
				x.parts[r.Name] = append(x.parts[r.Name], p.Name)
			}
			x.multi = true
		}
		if r.Shadow {
			for _, p := range r.Parts() {
				x.shadow[p.Name] = true
			}
			x.anyShadow = true
		}
	}
	return x
}

// allowParts is allow for a rule with several limits; allowAll counts it.
func (n *Node) allowParts(ctx context.Context, x *ruleIndex, rule, key string, hits int64, out *Decision) error {
	own := n.ownNow()
	if err := n.replica.Check(rule, key, hits); err != nil {
		n.countError(x, rule)
		return err // as a rule with one limit says it, not as a part
	}
	ds, _, err := n.allowAll(ctx, []Check{{Rule: rule, Key: key, Hits: hits}}, nil)
	if err == nil {
		*out = ds[0]
		// Timed as a check of one limit on its path is: a local one in 64,
		// any other every time.
		if p := out.Path; int(p) < numPaths && (p != window.PathLocal || sampledCheck(own)) {
			n.latency[p].Observe(n.ownNow() - own)
		}
	}
	return err
}

// combine is the decision of a rule with several limits from its parts':
// admitted if every part admitted, the refusing part's (the one with the
// longest wait) or, where all admit, the one with the least left, and never
// more remaining than the least any part has.
func combine(ds []Decision) Decision {
	bind, least, ok, shadowed := 0, ds[0].Remaining, true, false
	for _, d := range ds {
		ok = ok && d.Allowed
	}
	for i, d := range ds {
		least = min(least, d.Remaining)
		shadowed = shadowed || d.Shadowed
		switch {
		case !ok && !d.Allowed:
			if ds[bind].Allowed || d.RetryAfter > ds[bind].RetryAfter {
				bind = i
			}
		case ok && d.Remaining < ds[bind].Remaining:
			bind = i
		}
	}
	out := ds[bind]
	out.Allowed, out.Remaining, out.Shadowed = ok, least, shadowed
	return out
}

// shadowed turns a refusal under a rule in shadow mode into an admission
// that says what it would have been. Whoever counts the check counts it as
// a shadow refusal: the rule's table, which knows the rule is in shadow
// mode, or the node.
func (n *Node) shadowed(x *ruleIndex, rule string, d *Decision) {
	if d.Allowed || !x.shadow[rule] {
		return
	}
	d.Allowed, d.Shadowed = true, true
}
