package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cluster/envoyrls"
)

// envoyCollector exports an Envoy rate limit service's counters to the
// agent's /metrics.
type envoyCollector struct {
	s                      *envoyrls.Server
	requests, errs, shadow *prometheus.Desc
}

func newEnvoyCollector(s *envoyrls.Server) *envoyCollector {
	return &envoyCollector{
		s:        s,
		requests: prometheus.NewDesc("sluice_envoy_requests_total", envoyrls.HelpRequests, []string{"code"}, nil),
		errs:     prometheus.NewDesc("sluice_envoy_request_errors_total", envoyrls.HelpErrors, nil, nil),
		shadow:   prometheus.NewDesc("sluice_envoy_shadow_over_limit_total", envoyrls.HelpShadowOverLimit, nil, nil),
	}
}

func (c *envoyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.errs
	ch <- c.shadow
}

func (c *envoyCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.s.Counts()
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(n.OK), "OK")
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(n.OverLimit), "OVER_LIMIT")
	ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(n.Errors))
	ch <- prometheus.MustNewConstMetric(c.shadow, prometheus.CounterValue, float64(n.ShadowOverLimit))
}
