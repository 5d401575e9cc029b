package middleware

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/cluster"
)

// KeyFunc returns the key an HTTP request is counted under, and false when
// the request has none (see RefuseMissingKey). It must not keep r.
type KeyFunc func(r *http.Request) (key string, ok bool)

// HTTP returns middleware that checks each request, under the key that
// key finds, against l before next sees it: an admitted request goes on
// with the RateLimit and RateLimit-Policy fields set on its response
// (next may change them); a refused one is answered 429 with Retry-After
// and those fields, and next never sees it. A request with no key, or
// whose check fails, goes on unchecked unless RefuseMissingKey or
// FailClosed says otherwise; see the package documentation.
//
// key is required: the middleware has no default key, since a service
// behind a proxy that counted by peer address would count the proxy. A nil
// key or l panics, as an invalid option does.
func HTTP(l Limiter, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	if key == nil {
		panic("middleware: HTTP: nil KeyFunc")
	}
	c := newCore(l, opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, ok := key(r)
			e := c.check(r.Context(), k, ok)
			switch e.Outcome {
			case Admitted:
				c.setFields(w.Header(), &e.Decision)
				next.ServeHTTP(w, r)
			case Refused:
				c.refuse(w, r, &e.Decision)
			case NoKeyRefused:
				http.Error(w, "rate limit key missing", http.StatusBadRequest)
			case FailedClosed:
				http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			default: // NoKeyPassed, FailedOpen
				next.ServeHTTP(w, r)
			}
		})
	}
}

// setFields sets the RateLimit fields of decision d on h. Both values
// share one allocation; each is capped so that an Add to either copies.
func (c *core) setFields(h http.Header, d *cluster.Decision) {
	v := make([]string, 2)
	v[0], v[1] = c.rateLimitValue(d), c.policyValue(d)
	h[headerRateLimit] = v[0:1:1]
	h[headerRateLimitPolicy] = v[1:2:2]
}

// refuse answers a refused request: the fields, Retry-After, and the
// RefusalHandler's response or a line of plain text.
func (c *core) refuse(w http.ResponseWriter, r *http.Request, d *cluster.Decision) {
	h := w.Header()
	c.setFields(h, d)
	secs := retrySeconds(d.RetryAfter)
	h[headerRetryAfter] = []string{strconv.FormatInt(secs, 10)}
	if c.cfg.refusal != nil {
		c.cfg.refusal(w, r, *d)
		return
	}
	http.Error(w, fmt.Sprintf("rate limit exceeded, retry in %d s", secs), c.cfg.refusalStatus)
}
