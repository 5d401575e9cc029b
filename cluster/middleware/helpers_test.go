package middleware

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// fakeLimiter answers every check with one decision or error and records
// what it was asked.
type fakeLimiter struct {
	name string
	d    cluster.Decision
	err  error

	mu    sync.Mutex
	keys  []string
	hits  []int64
	ctxOK []bool // whether the check's context carried testCtxKey
}

// testCtxKey marks a request's context, so that a test sees the limiter
// was given it.
type testCtxKey struct{}

func (f *fakeLimiter) AllowN(ctx context.Context, key string, n int64) (cluster.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, key)
	f.hits = append(f.hits, n)
	f.ctxOK = append(f.ctxOK, ctx.Value(testCtxKey{}) != nil)
	return f.d, f.err
}

func (f *fakeLimiter) Name() string { return f.name }

// asked returns the keys the limiter was asked about.
func (f *fakeLimiter) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

// ruleLimiter is a fakeLimiter that says its rule.
type ruleLimiter struct {
	*fakeLimiter
	rule window.Rule
}

func (r ruleLimiter) Rule() (window.Rule, bool) { return r.rule, r.rule.Name != "" }

// admit is an admission with remaining left and the count back in reset.
func admit(limit, remaining int64, reset time.Duration) cluster.Decision {
	return cluster.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

// refuse is a refusal to retry after wait.
func refuse(limit int64, wait, reset time.Duration) cluster.Decision {
	return cluster.Decision{Limit: limit, RetryAfter: wait, ResetAfter: reset}
}

// errLimiterDown is what a failing fake limiter returns.
var errLimiterDown = errors.New("limiter down")

// fakeClock is a clock that stays where it is set, for real nodes whose
// decisions a test asserts exactly.
type fakeClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

// startNode starts a lone in-memory node with rule on a clock 10 s into a
// minute, and returns the handle on the rule.
func startNode(t testing.TB, rule window.Rule) *cluster.Limiter {
	t.Helper()
	clock := &fakeClock{at: time.Date(2030, 1, 1, 12, 0, 10, 0, time.UTC)}
	node, err := cluster.Start(context.Background(), cluster.Config{
		Name:  "mw-" + rule.Name,
		Rules: []window.Rule{rule},
		Now:   clock.Now,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { node.Close() })
	l, err := node.Limiter(rule.Name)
	if err != nil {
		t.Fatalf("Limiter(%q): %v", rule.Name, err)
	}
	return l
}

// sha256Hex is the hex SHA-256 of s, as a hashed key holds it.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
