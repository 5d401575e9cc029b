package middleware

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/cluster"
)

// Option changes how HTTP and the interceptors treat requests. Options
// that name HTTP or gRPC apply to that one only.
type Option func(*config)

// config is what the options set; the zero value is not the default
// (newConfig is).
type config struct {
	prefix        string
	cost          int64
	refuseMissing bool
	failClosed    bool
	refusalStatus int
	refusal       func(http.ResponseWriter, *http.Request, cluster.Decision)
	onEvent       func(Event)
	policyCount   int64
	policyWindow  time.Duration
}

// newConfig applies opts over the defaults. An option set to a value no
// request could be served with (a negative cost, a refusal status that is
// not an error) panics here, when the middleware is built, as
// http.Handle does for a nil handler: it is the program's mistake, never
// the client's.
func newConfig(opts []Option) config {
	c := config{cost: 1, refusalStatus: http.StatusTooManyRequests}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.cost < 0 {
		panic(fmt.Sprintf("middleware: Cost(%d): a request's hits must be ≥ 0", c.cost))
	}
	if c.refusalStatus < 400 || c.refusalStatus > 599 {
		panic(fmt.Sprintf("middleware: RefusalStatus(%d): a refusal's status must be 400–599", c.refusalStatus))
	}
	if c.policyCount < 0 || c.policyWindow < 0 || (c.policyCount == 0) != (c.policyWindow == 0) {
		panic(fmt.Sprintf("middleware: Policy(%d, %v): the count must be ≥ 1 and the window > 0", c.policyCount, c.policyWindow))
	}
	return c
}

// Prefix namespaces every key: the limiter is asked about prefix+key. Two
// middlewares that share a rule under different prefixes count apart.
func Prefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// Cost is the hits each request spends (default 1; 0 asks whether one hit
// would fit without spending any). A cost above the rule's count fails
// every check (cluster.ErrHitsOverCount), which the default admits and
// FailClosed refuses: OnEvent sees the error.
func Cost(hits int64) Option { return func(c *config) { c.cost = hits } }

// RefuseMissingKey answers a request whose key function finds no key with
// 400 Bad Request (codes.InvalidArgument), not passing it through.
func RefuseMissingKey() Option { return func(c *config) { c.refuseMissing = true } }

// FailClosed answers a request whose check fails (the limiter returned an
// error) with 503 Service Unavailable (codes.Unavailable) instead of
// admitting it.
func FailClosed() Option { return func(c *config) { c.failClosed = true } }

// RefusalStatus is the HTTP status of a refusal (default 429 Too Many
// Requests; 400–599). HTTP only.
func RefusalStatus(code int) Option { return func(c *config) { c.refusalStatus = code } }

// RefusalHandler writes the HTTP response to a refused request in place
// of the plain text one; when it is called the response already carries
// Retry-After and the RateLimit fields, and it writes the status itself
// (RefusalStatus is not used). d is the refusal. HTTP only.
func RefusalHandler(h func(w http.ResponseWriter, r *http.Request, d cluster.Decision)) Option {
	return func(c *config) { c.refusal = h }
}

// OnEvent calls f with every request's outcome, before the request is
// answered or passed on. It is called from the request's goroutine, so it
// must be quick and safe for concurrent use; (*Counts).Observe is one.
func OnEvent(f func(Event)) Option { return func(c *config) { c.onEvent = f } }

// Policy is the count and window RateLimit-Policy announces (q and w),
// for a Limiter that cannot say (not a RuleLimiter). Without it q is the
// decision's Limit and w the window of the RuleLimiter's rule.
func Policy(count int64, window time.Duration) Option {
	return func(c *config) { c.policyCount, c.policyWindow = count, window }
}
