package cluster

import (
	"bytes"
	"io"
	"net/http"
)

// metricsContentType is the Prometheus text exposition format, version 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// HTTPHandler returns the node's operator HTTP API:
//
//	GET /metrics  the node's node-wide metrics in the Prometheus text format
//	GET /healthz  200 "ok" while the node runs, 503 once it is closing
//	GET /readyz   200 "ready" once the node is Ready, else 503 and why
//
// The per-rule, per-path and per-peer metrics come from the collector of
// package cluster/prom, which a program registers in its own Prometheus
// registry and serves where it likes (the agent serves it at /metrics
// instead of the node-wide page).
//
// The handlers live on a ServeMux of their own. Programs that want pprof
// beside them (the agent does) mount it themselves, so that embedding a node
// never exposes a process's internals by accident.
func (n *Node) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", n.serveMetrics)
	mux.HandleFunc("GET /healthz", n.serveHealthz)
	mux.HandleFunc("GET /readyz", n.serveReadyz)
	return mux
}

// serveMetrics writes the metrics. They are rendered into a buffer first, so
// a failure is a clean 500 rather than a truncated page.
func (n *Node) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if err := n.metrics.snapshot().WritePrometheus(&buf); err != nil {
		http.Error(w, "writing metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", metricsContentType)
	h.Set("Cache-Control", "no-store")
	_, _ = buf.WriteTo(w) // a client that hung up is not the node's problem
}

// serveHealthz answers 200 while the node runs and 503 once Close (or Kill)
// has begun, so a load balancer stops sending traffic during the drain.
func (n *Node) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if n.closing() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "closed\n")
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// closing reports whether Close or Kill has begun.
func (n *Node) closing() bool { return n.isClosing.Load() }

// serveReadyz answers 200 once the node is Ready, and before that, or once
// it is closing, 503 with the reason on one line: an orchestrator sends a
// node traffic only once it holds what the fleet has admitted.
func (n *Node) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	switch {
	case n.closing():
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "closing\n")
	case !n.Ready():
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: the fleet's state has not been pulled from a peer yet (none answered)\n")
	default:
		_, _ = io.WriteString(w, "ready\n")
	}
}
