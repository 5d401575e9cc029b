package middleware

import (
	"context"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// Limiter is what the middleware checks requests against: one rule, by
// key. *cluster.Limiter satisfies it; a test gives a fake.
type Limiter interface {
	// AllowN checks n hits for key and records them if admitted.
	AllowN(ctx context.Context, key string, n int64) (cluster.Decision, error)
	// Name is the rule's name, the policy name in the RateLimit fields;
	// the middleware reads it once, when it is built.
	Name() string
}

// RuleLimiter is a Limiter that also says what its rule is now, as
// *cluster.Limiter does: the middleware asks it for the window it puts in
// RateLimit-Policy (w) on every request, so the field follows a Reload. A
// Limiter without it, and with no Policy option, sends RateLimit-Policy
// without w.
type RuleLimiter interface {
	Limiter
	// Rule returns the rule as it is now, and false if it was removed.
	Rule() (window.Rule, bool)
}

// The handle of a node is what this package is for: keep it a Limiter.
var _ RuleLimiter = (*cluster.Limiter)(nil)
