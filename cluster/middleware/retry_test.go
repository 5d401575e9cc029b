package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// TestHTTPRetryAtRetryAfterSliding: on a sliding window, a client refused
// with Retry-After S that comes back S seconds later, nothing else having
// arrived, is admitted. The wait is rounded up to whole seconds, so the
// retry comes at or after the exact moment the window has room.
func TestHTTPRetryAtRetryAfterSliding(t *testing.T) {
	tests := []struct {
		name   string
		count  int64
		window time.Duration
		spend  int // requests before the refusal, a second apart
	}{
		{"3 per 10 s", 3, 10 * time.Second, 3},
		{"5 per minute, spread", 5, time.Minute, 5},
		{"2 per 7 s", 2, 7 * time.Second, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{at: time.Date(2030, 1, 1, 12, 0, 3, 0, time.UTC)}
			node, err := cluster.Start(context.Background(), cluster.Config{
				Name:  "mw-retry",
				Rules: []window.Rule{{Name: "api", Count: tt.count, Window: tt.window, Type: window.Sliding}},
				Now:   clock.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { node.Close() })
			api, err := node.Limiter("api")
			if err != nil {
				t.Fatal(err)
			}
			h := HTTP(api, KeyFromHeader("X-API-Key"))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			get := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("X-API-Key", "k")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			advance := func(d time.Duration) {
				clock.mu.Lock()
				clock.at = clock.at.Add(d)
				clock.mu.Unlock()
			}
			for i := range tt.spend {
				if rec := get(); rec.Code != http.StatusOK {
					t.Fatalf("request %d: %d, want 200", i+1, rec.Code)
				}
				advance(time.Second)
			}
			rec := get()
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("request over the count: %d, want 429", rec.Code)
			}
			secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if err != nil || secs < 1 {
				t.Fatalf("Retry-After %q, want whole seconds ≥ 1", rec.Header().Get("Retry-After"))
			}
			// Just before the rounded-up wait the window may or may not
			// have room; at it, it must.
			advance(time.Duration(secs) * time.Second)
			if rec := get(); rec.Code != http.StatusOK {
				t.Errorf("retry at Retry-After (%d s): %d %s, want 200", secs, rec.Code, rec.Header().Get("RateLimit"))
			}
		})
	}
}
