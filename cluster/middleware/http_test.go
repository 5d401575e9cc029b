package middleware

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// TestHTTPOutcomes runs a request through the middleware for each way it
// can end, and checks the answer, whether the handler ran, the key and
// hits the limiter was asked about, and the event counted.
func TestHTTPOutcomes(t *testing.T) {
	longKey := strings.Repeat("k", counter.MaxKeyLen)
	tests := []struct {
		name        string
		d           cluster.Decision
		err         error
		opts        []Option
		key         string // the X-Key header; "" for none
		wantStatus  int
		wantBody    string // a substring of the body
		wantHandled bool
		wantAsked   []string
		wantHits    int64
		wantOutcome Outcome
	}{
		{name: "admitted", d: admit(10, 9, time.Second), key: "u1",
			wantStatus: 200, wantBody: "handled", wantHandled: true, wantAsked: []string{"u1"}, wantHits: 1, wantOutcome: Admitted},
		{name: "refused", d: refuse(10, 1500*time.Millisecond, time.Second), key: "u1",
			wantStatus: 429, wantBody: "rate limit exceeded, retry in 2 s", wantAsked: []string{"u1"}, wantHits: 1, wantOutcome: Refused},
		{name: "prefix and cost", d: admit(10, 7, time.Second), key: "u1", opts: []Option{Prefix("http:"), Cost(3)},
			wantStatus: 200, wantBody: "handled", wantHandled: true, wantAsked: []string{"http:u1"}, wantHits: 3, wantOutcome: Admitted},
		{name: "cost 0", d: admit(10, 10, 0), key: "u1", opts: []Option{Cost(0)},
			wantStatus: 200, wantBody: "handled", wantHandled: true, wantAsked: []string{"u1"}, wantHits: 0, wantOutcome: Admitted},
		{name: "key at the limit passed as is", d: admit(10, 9, time.Second), key: longKey,
			wantStatus: 200, wantBody: "handled", wantHandled: true, wantAsked: []string{longKey}, wantHits: 1, wantOutcome: Admitted},
		{name: "longer key counted by its digest", d: admit(10, 9, time.Second), key: longKey + "k", opts: []Option{Prefix("p:")},
			wantStatus: 200, wantBody: "handled", wantHandled: true,
			wantAsked: []string{"p:sha256:" + sha256Hex(longKey+"k")}, wantHits: 1, wantOutcome: Admitted},
		{name: "key not UTF-8 counted by its digest", d: admit(10, 9, time.Second), key: "u\xff1", opts: []Option{Prefix("p:")},
			wantStatus: 200, wantBody: "handled", wantHandled: true,
			wantAsked: []string{"p:sha256:" + sha256Hex("u\xff1")}, wantHits: 1, wantOutcome: Admitted},
		{name: "missing key passed through", d: admit(10, 9, time.Second),
			wantStatus: 200, wantBody: "handled", wantHandled: true, wantOutcome: NoKeyPassed},
		{name: "missing key refused", d: admit(10, 9, time.Second), opts: []Option{RefuseMissingKey()},
			wantStatus: 400, wantBody: "rate limit key missing", wantOutcome: NoKeyRefused},
		{name: "error, fail open", err: errLimiterDown, key: "u1",
			wantStatus: 200, wantBody: "handled", wantHandled: true, wantAsked: []string{"u1"}, wantHits: 1, wantOutcome: FailedOpen},
		{name: "error, fail closed", err: errLimiterDown, key: "u1", opts: []Option{FailClosed()},
			wantStatus: 503, wantBody: "rate limiter unavailable", wantAsked: []string{"u1"}, wantHits: 1, wantOutcome: FailedClosed},
		{name: "unknown rule, fail closed", err: fmt.Errorf("sluice: %w \"api\"", cluster.ErrUnknownRule), key: "u1",
			opts:       []Option{FailClosed()},
			wantStatus: 503, wantBody: "rate limiter unavailable", wantAsked: []string{"u1"}, wantHits: 1, wantOutcome: FailedClosed},
		{name: "outcome unknown, fail open", err: cluster.ErrOutcomeUnknown, key: "u1",
			wantStatus: 200, wantBody: "handled", wantHandled: true, wantAsked: []string{"u1"}, wantHits: 1, wantOutcome: FailedOpen},
		{name: "custom refusal", d: refuse(10, 5*time.Second, time.Second), key: "u1",
			opts: []Option{RefusalHandler(func(w http.ResponseWriter, r *http.Request, d cluster.Decision) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprintf(w, `{"retry_after_ms":%d,"retry":%q}`, d.RetryAfter.Milliseconds(), w.Header().Get("Retry-After"))
			})},
			wantStatus: 429, wantBody: `{"retry_after_ms":5000,"retry":"5"}`, wantAsked: []string{"u1"}, wantHits: 1, wantOutcome: Refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeLimiter{name: "api", d: tt.d, err: tt.err}
			var counts Counts
			var events []Event
			opts := append([]Option{OnEvent(func(e Event) { counts.Observe(e); events = append(events, e) })}, tt.opts...)
			handled := false
			h := HTTP(f, KeyFromHeader("X-Key"), opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				handled = true
				io.WriteString(w, "handled")
			}))
			req := httptest.NewRequest("GET", "/", nil)
			req = req.WithContext(context.WithValue(req.Context(), testCtxKey{}, true))
			if tt.key != "" {
				req.Header.Set("X-Key", tt.key)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tt.wantStatus || handled != tt.wantHandled {
				t.Errorf("status %d, handled %v; want %d, %v", rec.Code, handled, tt.wantStatus, tt.wantHandled)
			}
			if body := rec.Body.String(); !strings.Contains(body, tt.wantBody) {
				t.Errorf("body %q, want it to hold %q", body, tt.wantBody)
			}
			if got := f.asked(); strings.Join(got, "|") != strings.Join(tt.wantAsked, "|") {
				t.Errorf("limiter asked about %q, want %q", got, tt.wantAsked)
			}
			for i, n := range f.hits {
				if n != tt.wantHits || !f.ctxOK[i] {
					t.Errorf("check %d: %d hits, request's context %v; want %d hits and the request's context", i, n, f.ctxOK[i], tt.wantHits)
				}
			}
			if len(events) != 1 || events[0].Outcome != tt.wantOutcome {
				t.Fatalf("events %+v, want one %v", events, tt.wantOutcome)
			}
			e := events[0]
			if (e.Err != nil) != (tt.err != nil) || (tt.err != nil && !errors.Is(e.Err, tt.err)) {
				t.Errorf("event error %v, want %v", e.Err, tt.err)
			}
			if len(tt.wantAsked) > 0 && e.Key != tt.wantAsked[0] {
				t.Errorf("event key %q, want %q", e.Key, tt.wantAsked[0])
			}
			want := Stats{}
			switch tt.wantOutcome {
			case Admitted:
				want.Admitted = 1
			case Refused:
				want.Refused = 1
			case NoKeyPassed:
				want.NoKeyPassed = 1
			case NoKeyRefused:
				want.NoKeyRefused = 1
			case FailedOpen:
				want.FailedOpen = 1
			case FailedClosed:
				want.FailedClosed = 1
			}
			if got := counts.Stats(); got != want {
				t.Errorf("stats %+v, want %+v", got, want)
			}
			if tt.wantOutcome == Refused && rec.Header().Get("Retry-After") == "" {
				t.Errorf("a refusal without Retry-After: %v", rec.Header())
			}
			if tt.wantOutcome != Admitted && tt.wantOutcome != Refused && rec.Header().Get("RateLimit") != "" {
				t.Errorf("%v carries RateLimit %q, with no decision to tell", tt.wantOutcome, rec.Header().Get("RateLimit"))
			}
		})
	}
}

// TestHTTPHandlerMayOverride: the fields are set before the handler runs,
// so it may change or add to them.
func TestHTTPHandlerMayOverride(t *testing.T) {
	f := &fakeLimiter{name: "api", d: admit(10, 9, time.Second)}
	h := HTTP(f, KeyFromHeader("X-Key"))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := w.Header().Get("RateLimit"); got != `"api";r=9;t=1` {
			t.Errorf("handler sees RateLimit %q", got)
		}
		w.Header().Add("RateLimit", `"other";r=1;t=1`)
	}))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Key", "u1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got := rec.Header().Values("RateLimit"); len(got) != 2 || got[1] != `"other";r=1;t=1` {
		t.Errorf("RateLimit %q, want the middleware's and the handler's", got)
	}
	if got := rec.Header().Values("RateLimit-Policy"); len(got) != 1 || got[0] != `"api";q=10` {
		t.Errorf("RateLimit-Policy %q: an Add to RateLimit must not touch it", got)
	}
}

// TestHTTPInvalidOptions: options no request could be served with are
// found when the middleware is built.
func TestHTTPInvalidOptions(t *testing.T) {
	f := &fakeLimiter{name: "api"}
	tests := []struct {
		name string
		l    Limiter
		key  KeyFunc
		opts []Option
	}{
		{"negative cost", f, KeyFromHeader("X"), []Option{Cost(-1)}},
		{"status 200", f, KeyFromHeader("X"), []Option{RefusalStatus(200)}},
		{"status 600", f, KeyFromHeader("X"), []Option{RefusalStatus(600)}},
		{"policy count without window", f, KeyFromHeader("X"), []Option{Policy(10, 0)}},
		{"policy negative", f, KeyFromHeader("X"), []Option{Policy(-1, time.Second)}},
		{"nil key", f, nil, nil},
		{"nil limiter", nil, KeyFromHeader("X"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("HTTP built with %s", tt.name)
				}
			}()
			HTTP(tt.l, tt.key, tt.opts...)
		})
	}
}

// TestHTTPLoneNode sends three requests from one client through a real
// node's rule of two per minute, over a real HTTP server: the third is
// refused, told to come back when the fixed window ends, 50 s on.
func TestHTTPLoneNode(t *testing.T) {
	api := startNode(t, window.Rule{Name: "api", Count: 2, Window: time.Minute, Type: window.Fixed})
	var counts Counts
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	srv := httptest.NewServer(HTTP(api, KeyFromHeader("X-API-Key"), OnEvent(counts.Observe))(mux))
	t.Cleanup(srv.Close)

	tests := []struct {
		status                    int
		body, rl, policy, retryAt string
	}{
		{200, "hello\n", `"api";r=1;t=50`, `"api";q=2;w=60`, ""},
		{200, "hello\n", `"api";r=0;t=50`, `"api";q=2;w=60`, ""},
		{429, "rate limit exceeded, retry in 50 s\n", `"api";r=0;t=50`, `"api";q=2;w=60`, "50"},
	}
	for i, tt := range tests {
		req, err := http.NewRequestWithContext(context.Background(), "GET", srv.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", "tenant-7")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("request %d: reading the body: %v", i+1, err)
		}
		got := []string{fmt.Sprint(resp.StatusCode), string(body), resp.Header.Get("RateLimit"),
			resp.Header.Get("RateLimit-Policy"), resp.Header.Get("Retry-After")}
		want := []string{fmt.Sprint(tt.status), tt.body, tt.rl, tt.policy, tt.retryAt}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("request %d: got %q, want %q", i+1, got, want)
		}
	}
	if got, want := counts.Stats(), (Stats{Admitted: 2, Refused: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// TestHTTPKeyNotUTF8 sends a key header holding a byte above 0x7F, which
// HTTP allows in a field value and a node refuses in a key, over a real
// HTTP server to a real node: the key is counted under its digest, so the
// third request of two per minute is refused rather than failing open
// past the limit.
func TestHTTPKeyNotUTF8(t *testing.T) {
	api := startNode(t, window.Rule{Name: "api", Count: 2, Window: time.Minute, Type: window.Fixed})
	var counts Counts
	var asked []string
	srv := httptest.NewServer(HTTP(api, KeyFromHeader("X-API-Key"), Prefix("h:"),
		OnEvent(func(e Event) { counts.Observe(e); asked = append(asked, e.Key) }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })))
	t.Cleanup(srv.Close)
	for i, want := range []int{200, 200, 429} {
		req, err := http.NewRequestWithContext(context.Background(), "GET", srv.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", "tenant-\xff")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if got, want := counts.Stats(), (Stats{Admitted: 2, Refused: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if want := "h:sha256:" + sha256Hex("tenant-\xff"); len(asked) == 0 || asked[0] != want {
		t.Errorf("counted under %q, want %q", asked, want)
	}
}

// TestHTTPClientGoneEndsCheck: the limiter is given the request's
// context, so a client that goes away ends the check (here a node's check
// on a context already ended fails with its error) and the middleware
// counts it as a failure, failing open.
func TestHTTPClientGoneEndsCheck(t *testing.T) {
	api := startNode(t, window.Rule{Name: "api", Count: 2, Window: time.Minute})
	var events []Event
	h := HTTP(api, KeyFromHeader("X-Key"), OnEvent(func(e Event) { events = append(events, e) }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	req.Header.Set("X-Key", "u1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if len(events) != 1 || events[0].Outcome != FailedOpen || !errors.Is(events[0].Err, context.Canceled) {
		t.Fatalf("events %+v, want one FailedOpen with context.Canceled", events)
	}
}
