package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// benchLimiter admits everything and says its rule, without locks, so that
// the benchmark measures the middleware alone.
type benchLimiter struct{ rule window.Rule }

func (b *benchLimiter) AllowN(context.Context, string, int64) (cluster.Decision, error) {
	return cluster.Decision{Allowed: true, Limit: 100, Remaining: 42, ResetAfter: 17 * time.Second}, nil
}
func (b *benchLimiter) Name() string              { return b.rule.Name }
func (b *benchLimiter) Rule() (window.Rule, bool) { return b.rule, true }

// benchWriter is a ResponseWriter whose header map is emptied, not made
// again, for each request: what a server's connection costs per request
// is not the middleware's.
type benchWriter struct{ h http.Header }

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(int)             {}

// BenchmarkHTTPAdmitted is an admitted request through the middleware,
// keyed by a header, with both RateLimit fields set.
func BenchmarkHTTPAdmitted(b *testing.B) {
	l := &benchLimiter{rule: window.Rule{Name: "api", Count: 100, Window: time.Minute}}
	h := HTTP(l, KeyFromHeader("X-API-Key"))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-API-Key", "tenant-7")
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	if got := w.h.Get("RateLimit"); got != `"api";r=42;t=17` {
		b.Fatalf("RateLimit %q", got)
	}
}

// BenchmarkHTTPAdmittedClientIP is BenchmarkHTTPAdmitted keyed by the
// client IP behind a trusted proxy, through X-Forwarded-For.
func BenchmarkHTTPAdmittedClientIP(b *testing.B) {
	l := &benchLimiter{rule: window.Rule{Name: "api", Count: 100, Window: time.Minute}}
	h := HTTP(l, KeyFromClientIP(proxyNet))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.2:36000"
	req.Header.Set("X-Forwarded-For", "198.51.100.7, 10.0.0.9")
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}
