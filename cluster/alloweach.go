package cluster

import (
	"context"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
)

// allowStrictEach decides checks, each under a strict rule with one limit,
// each on its own, as Allow would one after the other, but in one entry of
// the strict log: a batch's strict checks then wait for one commit rather
// than one each. The decisions go to out, in order. ok is false, and
// nothing is decided, when strict mode does not decide every one of them
// (a rule the log does not know yet); the caller then decides them one by
// one.
func (n *Node) allowStrictEach(ctx context.Context, checks []strictapi.Check, out []Decision) (ok bool, err error) {
	x := n.index.Load()
	if n.strict == nil {
		return false, nil
	}
	if n.isClosing.Load() {
		return false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	own := n.ownNow()
	ds, ok, err := n.strict.AllowEach(ctx, checks)
	if !ok {
		return false, nil
	}
	for i, c := range checks {
		if err == nil {
			out[i].from(&ds[i])
			if x.anyShadow {
				n.shadowed(x, c.Rule, &out[i])
			}
		}
		n.countStrict(x, c.Rule, own, &out[i], err)
	}
	return true, err
}

// strictSingle reports whether rule is a strict rule with one limit, as
// the node has it: one whose checks allowStrictEach may decide.
func (x *ruleIndex) strictSingle(rule string) bool {
	r, ok := x.rules[rule]
	return ok && r.IsStrict() && (!x.multi || x.parts[rule] == nil)
}
