package middleware

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

func TestSeconds(t *testing.T) {
	tests := []struct {
		d           time.Duration
		ceil, retry int64
	}{
		{0, 0, 1},
		{-time.Second, 0, 1},
		{time.Nanosecond, 1, 1},
		{time.Millisecond, 1, 1},
		{200 * time.Millisecond, 1, 1},
		{time.Second, 1, 1},
		{1001 * time.Millisecond, 2, 2},
		{time.Second + time.Nanosecond, 2, 2},
		{50 * time.Second, 50, 50},
		{time.Hour, 3600, 3600},
		{1<<63 - 1, 9223372037, 9223372037},
	}
	for _, tt := range tests {
		if got := ceilSeconds(tt.d); got != tt.ceil {
			t.Errorf("ceilSeconds(%v) = %d, want %d", tt.d, got, tt.ceil)
		}
		if got := retrySeconds(tt.d); got != tt.retry {
			t.Errorf("retrySeconds(%v) = %d, want %d", tt.d, got, tt.retry)
		}
	}
}

func TestSFString(t *testing.T) {
	tests := []struct{ name, want string }{
		{"api", `"api"`},
		{"", `""`},
		{"a.b:c-d_e", `"a.b:c-d_e"`},
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
		{"tab\there", `"tab_here"`},
		{"nl\r\n", `"nl__"`},
		{"del\x7f", `"del_"`},
		{"café", `"caf_"`},
		{"日本", `"__"`},
		{"bad\xffutf8", `"bad_utf8"`},
		{"\x00", `"_"`},
	}
	for _, tt := range tests {
		got := sfString(tt.name)
		if got != tt.want {
			t.Errorf("sfString(%q) = %s, want %s", tt.name, got, tt.want)
		}
		if !validSFString(got) {
			t.Errorf("sfString(%q) = %s is not a valid sf-string", tt.name, got)
		}
	}
}

// validSFString reports whether s is an sf-string as RFC 9651 §4.2.5
// parses one: quoted printable ASCII, `"` and `\` escaped, nothing after.
func validSFString(s string) bool {
	if len(s) < 2 || s[0] != '"' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i >= len(s) || (s[i] != '"' && s[i] != '\\') {
				return false
			}
		case c == '"':
			return i == len(s)-1
		case c < 0x20 || c > 0x7e:
			return false
		}
	}
	return false
}

// TestHTTPFields checks the fields a response carries for each kind of
// decision, rounding included, through the middleware.
func TestHTTPFields(t *testing.T) {
	minute := window.Rule{Name: "api", Count: 100, Window: time.Minute}
	tests := []struct {
		name        string
		limiter     Limiter
		opts        []Option
		wantStatus  int
		wantRL      string
		wantPolicy  string
		wantRetry   string // "" for none
		wantHandled bool
	}{
		{"admitted", ruleLimiter{&fakeLimiter{name: "api", d: admit(100, 99, 60*time.Second)}, minute}, nil,
			200, `"api";r=99;t=60`, `"api";q=100;w=60`, "", true},
		{"admitted, reset 0.2 s", ruleLimiter{&fakeLimiter{name: "api", d: admit(100, 99, 200*time.Millisecond)}, minute}, nil,
			200, `"api";r=99;t=1`, `"api";q=100;w=60`, "", true},
		{"admitted, full", ruleLimiter{&fakeLimiter{name: "api", d: admit(100, 100, 0)}, minute}, nil,
			200, `"api";r=100;t=0`, `"api";q=100;w=60`, "", true},
		{"refused 0.2 s", ruleLimiter{&fakeLimiter{name: "api", d: refuse(100, 200*time.Millisecond, time.Minute)}, minute}, nil,
			429, `"api";r=0;t=1`, `"api";q=100;w=60`, "1", false},
		{"refused 1 ms", ruleLimiter{&fakeLimiter{name: "api", d: refuse(100, time.Millisecond, time.Minute)}, minute}, nil,
			429, `"api";r=0;t=1`, `"api";q=100;w=60`, "1", false},
		{"refused 1.0 s", ruleLimiter{&fakeLimiter{name: "api", d: refuse(100, time.Second, time.Minute)}, minute}, nil,
			429, `"api";r=0;t=1`, `"api";q=100;w=60`, "1", false},
		{"refused 1.001 s", ruleLimiter{&fakeLimiter{name: "api", d: refuse(100, 1001*time.Millisecond, time.Minute)}, minute}, nil,
			429, `"api";r=0;t=2`, `"api";q=100;w=60`, "2", false},
		{"refused with no wait named", ruleLimiter{&fakeLimiter{name: "api", d: refuse(100, 0, time.Minute)}, minute}, nil,
			429, `"api";r=0;t=1`, `"api";q=100;w=60`, "1", false},
		{"refused, status 503", ruleLimiter{&fakeLimiter{name: "api", d: refuse(100, 3*time.Second, time.Minute)}, minute},
			[]Option{RefusalStatus(503)}, 503, `"api";r=0;t=3`, `"api";q=100;w=60`, "3", false},
		{"no rule: no w", &fakeLimiter{name: "api", d: admit(10, 3, 5*time.Second)}, nil,
			200, `"api";r=3;t=5`, `"api";q=10`, "", true},
		{"Policy option", &fakeLimiter{name: "api", d: admit(10, 3, 5*time.Second)}, []Option{Policy(10, 1500*time.Millisecond)},
			200, `"api";r=3;t=5`, `"api";q=10;w=2`, "", true},
		{"sub-second window", ruleLimiter{&fakeLimiter{name: "fast", d: admit(5, 4, 100*time.Millisecond)},
			window.Rule{Name: "fast", Count: 5, Window: 100 * time.Millisecond}}, nil,
			200, `"fast";r=4;t=1`, `"fast";q=5;w=1`, "", true},
		{"rule removed: no w", ruleLimiter{&fakeLimiter{name: "api", d: admit(100, 1, time.Second)}, window.Rule{}}, nil,
			200, `"api";r=1;t=1`, `"api";q=100`, "", true},
		{"name quoted", &fakeLimiter{name: "a\"b\\c\x01é", d: admit(1, 0, time.Second)}, nil,
			200, `"a\"b\\c__";r=0;t=1`, `"a\"b\\c__";q=1`, "", true},
		{"negative remaining held at 0", &fakeLimiter{name: "api", d: admit(1, -3, time.Second)}, nil,
			200, `"api";r=0;t=1`, `"api";q=1`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handled := false
			h := HTTP(tt.limiter, KeyFromHeader("X-Key"), tt.opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				handled = true
			}))
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-Key", "k")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || handled != tt.wantHandled {
				t.Errorf("status %d, handled %v; want %d, %v", rec.Code, handled, tt.wantStatus, tt.wantHandled)
			}
			if got := rec.Header().Get("RateLimit"); got != tt.wantRL {
				t.Errorf("RateLimit: %s, want %s", got, tt.wantRL)
			}
			if got := rec.Header().Get("RateLimit-Policy"); got != tt.wantPolicy {
				t.Errorf("RateLimit-Policy: %s, want %s", got, tt.wantPolicy)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.wantRetry {
				t.Errorf("Retry-After: %q, want %q", got, tt.wantRetry)
			}
		})
	}
}

// TestPolicyFollowsRule: the policy field is remade when the rule's count
// or window changes (a Reload), and shared while it does not.
func TestPolicyFollowsRule(t *testing.T) {
	f := &fakeLimiter{name: "api", d: admit(10, 9, time.Second)}
	rl := &ruleLimiter{fakeLimiter: f, rule: window.Rule{Name: "api", Count: 10, Window: time.Second}}
	c := newCore(rl, nil)
	d := f.d
	first := c.policyValue(&d)
	if again := c.policyValue(&d); again != first || first != `"api";q=10;w=1` {
		t.Fatalf("policy %s then %s, want \"api\";q=10;w=1 twice", first, again)
	}
	rl.rule.Window = time.Minute
	if got := c.policyValue(&d); got != `"api";q=10;w=60` {
		t.Errorf("after the window changed: %s, want \"api\";q=10;w=60", got)
	}
	d.Limit = 20
	if got := c.policyValue(&d); got != `"api";q=20;w=60` {
		t.Errorf("after the count changed: %s, want \"api\";q=20;w=60", got)
	}
}
