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

// Counts are a Server's counters since it started, for a metrics exporter.
type Counts struct {
	// OK and OverLimit count requests answered, by overall code.
	OK, OverLimit uint64
	// Errors counts requests answered with an error.
	Errors uint64
	// ShadowOverLimit counts descriptors in shadow_mode that were over
	// their limit and reported OK.
	ShadowOverLimit uint64
}

// Counts returns the server's counters.
func (s *Server) Counts() Counts {
	m := &s.metrics
	return Counts{OK: m.ok.Load(), OverLimit: m.overLimit.Load(), Errors: m.errors.Load(),
		ShadowOverLimit: m.shadowOverLimit.Load()}
}

// WritePrometheus writes the server's counters in the Prometheus text
// format: requests by overall code, failed requests, and shadow_mode
// descriptors found over their limit.
func (s *Server) WritePrometheus(w io.Writer) error {
	c := s.Counts()
	_, err := fmt.Fprintf(w, `# HELP sluice_envoy_requests_total %s
# TYPE sluice_envoy_requests_total counter
sluice_envoy_requests_total{code="OK"} %d
sluice_envoy_requests_total{code="OVER_LIMIT"} %d
# HELP sluice_envoy_request_errors_total %s
# TYPE sluice_envoy_request_errors_total counter
sluice_envoy_request_errors_total %d
# HELP sluice_envoy_shadow_over_limit_total %s
# TYPE sluice_envoy_shadow_over_limit_total counter
sluice_envoy_shadow_over_limit_total %d
`, HelpRequests, c.OK, c.OverLimit, HelpErrors, c.Errors, HelpShadowOverLimit, c.ShadowOverLimit)
	return err
}

// The help texts of the server's metrics, shared by WritePrometheus and
// an exporter built on Counts.
const (
	HelpRequests        = "ShouldRateLimit requests answered, by overall code."
	HelpErrors          = "ShouldRateLimit requests answered with an error."
	HelpShadowOverLimit = "Descriptors in shadow_mode that were over their limit, and reported OK."
)
