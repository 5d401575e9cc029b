package cluster

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// startHTTPNode starts a single in-memory node and serves its HTTPHandler
// on a test server.
func startHTTPNode(t *testing.T) (*Node, *httptest.Server) {
	t.Helper()
	rule := window.Rule{Name: "api", Count: 10, Window: 10 * time.Second, SyncInterval: 200 * time.Millisecond}
	n, err := Start(context.Background(), Config{Name: "http-node", Rules: []window.Rule{rule}, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n, serveHTTP(t, n)
}

// serveHTTP serves n's HTTPHandler on a test server.
func serveHTTP(t *testing.T, n *Node) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(n.HTTPHandler())
	t.Cleanup(srv.Close)
	return srv
}

// httpDo sends one request and returns the status, a header and the body.
func httpDo(t *testing.T, method, url, header string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header.Get(header), string(body)
}

func TestHTTPHandler(t *testing.T) {
	n, srv := startHTTPNode(t)
	n.metrics.DeltasSent.Store(7)
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		header     string // a response header to check
		wantHeader string // its value, as a prefix
		wantBody   []string
	}{
		{"metrics", "GET", "/metrics", 200, "Content-Type", "text/plain; version=0.0.4",
			[]string{"# TYPE sluice_members gauge\n", "\nsluice_sync_deltas_sent_total 7\n", "# HELP sluice_peers "}},
		{"metrics head", "HEAD", "/metrics", 200, "Content-Type", "text/plain; version=0.0.4", nil},
		{"metrics post", "POST", "/metrics", 405, "Allow", "GET", nil},
		{"healthz", "GET", "/healthz", 200, "Cache-Control", "no-store", []string{"ok\n"}},
		{"healthz delete", "DELETE", "/healthz", 405, "Allow", "GET", nil},
		{"readyz", "GET", "/readyz", 200, "Cache-Control", "no-store", []string{"ready\n"}},
		{"readyz post", "POST", "/readyz", 405, "Allow", "GET", nil},
		{"no pprof here", "GET", "/debug/pprof/", 404, "", "", nil},
		{"root", "GET", "/", 404, "", "", nil},
		{"unknown path", "GET", "/metricsx", 404, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, header, body := httpDo(t, tt.method, srv.URL+tt.path, tt.header)
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d (body %q)", status, tt.wantStatus, body)
			}
			if tt.header != "" && !strings.HasPrefix(header, tt.wantHeader) {
				t.Errorf("%s %q, want it to start with %q", tt.header, header, tt.wantHeader)
			}
			for _, want := range tt.wantBody {
				if !strings.Contains(body, want) {
					t.Errorf("body lacks %q:\n%s", want, body)
				}
			}
		})
	}
}

func TestHTTPHandlerMetricsMatchWritePrometheus(t *testing.T) {
	n, srv := startHTTPNode(t)
	n.metrics.Members.Store(3)
	var want strings.Builder
	if err := n.Metrics().WritePrometheus(&want); err != nil {
		t.Fatal(err)
	}
	_, _, body := httpDo(t, "GET", srv.URL+"/metrics", "")
	if body != want.String() {
		t.Errorf("/metrics\n got %q\nwant %q", body, want.String())
	}
	if !strings.Contains(body, "\nsluice_members 3\n") {
		t.Errorf("/metrics lacks sluice_members 3:\n%s", body)
	}
}

func TestHTTPHandlerHealthzAfterClose(t *testing.T) {
	n, srv := startHTTPNode(t)
	if status, _, body := httpDo(t, "GET", srv.URL+"/healthz", ""); status != 200 || body != "ok\n" {
		t.Fatalf("before Close: %d %q, want 200 \"ok\\n\"", status, body)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if status, _, body := httpDo(t, "GET", srv.URL+"/healthz", ""); status != 503 || body != "closed\n" {
		t.Fatalf("after Close: %d %q, want 503 \"closed\\n\"", status, body)
	}
	if status, _, body := httpDo(t, "GET", srv.URL+"/readyz", ""); status != 503 || body != "closing\n" {
		t.Fatalf("/readyz after Close: %d %q, want 503 \"closing\\n\"", status, body)
	}
	// Metrics stay readable after Close: the last values are still useful.
	if status, _, _ := httpDo(t, "GET", srv.URL+"/metrics", ""); status != 200 {
		t.Errorf("/metrics after Close: %d, want 200", status)
	}
}

func TestHTTPHandlerNotDefaultServeMux(t *testing.T) {
	n, _ := startHTTPNode(t)
	if h := n.HTTPHandler(); h == http.DefaultServeMux {
		t.Fatal("HTTPHandler returned http.DefaultServeMux")
	}
}
