package middleware_test

import (
	"context"
	"net/netip"

	"github.com/sluicehq/sluice/cluster"
)

// netipPrefix parses a prefix the examples know to be valid.
func netipPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// fixedLimiter answers every check with one decision: a Limiter is an
// interface, so a test of a service needs no node.
type fixedLimiter struct{ d cluster.Decision }

func (f fixedLimiter) AllowN(context.Context, string, int64) (cluster.Decision, error) {
	return f.d, nil
}
func (f fixedLimiter) Name() string { return "api" }
