package envoyrls

import (
	"fmt"
	"io"
	"sync/atomic"
)

// counters are what a Server counts, for /metrics.
type counters struct {
	ok, overLimit, errors atomic.Uint64
	// shadowOverLimit counts shadow_mode descriptors that were over their
	// limit and reported OK.
	shadowOverLimit atomic.Uint64
}

// WritePrometheus writes the server's counters in the Prometheus text
// format: requests by overall code, failed requests, and shadow_mode
// descriptors found over their limit.
func (s *Server) WritePrometheus(w io.Writer) error {
	m := &s.metrics
	_, err := fmt.Fprintf(w, `# HELP sluice_envoy_requests_total ShouldRateLimit requests answered, by overall code.
# TYPE sluice_envoy_requests_total counter
sluice_envoy_requests_total{code="OK"} %d
sluice_envoy_requests_total{code="OVER_LIMIT"} %d
# HELP sluice_envoy_request_errors_total ShouldRateLimit requests answered with an error.
# TYPE sluice_envoy_request_errors_total counter
sluice_envoy_request_errors_total %d
# HELP sluice_envoy_shadow_over_limit_total Descriptors in shadow_mode that were over their limit, and reported OK.
# TYPE sluice_envoy_shadow_over_limit_total counter
sluice_envoy_shadow_over_limit_total %d
`, m.ok.Load(), m.overLimit.Load(), m.errors.Load(), m.shadowOverLimit.Load())
	return err
}
