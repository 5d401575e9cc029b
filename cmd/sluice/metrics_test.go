package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// metricsTestConfig has a rule of each kind the metrics tell apart: a
// batched rule, a strict one and a batched one in shadow mode, each with
// room for few checks, so that a test sees every result.
const metricsTestConfig = `name: metrics-node
rules:
  - name: batched
    count: 3
    time_window: 10
    window_type: fixed
    sync_interval: 0.5
  - name: strict
    count: 2
    time_window: 10
    window_type: fixed
    sync_interval: -1
  - name: shadowed
    count: 1
    time_window: 10
    window_type: fixed
    shadow: true
`

// metricsEnvoyConfig is envoyTestConfig's limit of 2 a minute and a
// shadow_mode limit of 1 a minute.
const metricsEnvoyConfig = envoyTestConfig + `  - key: generic_key
    value: shadowed
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// scrapeMetrics GETs an agent's /metrics and parses it with the Prometheus
// text parser, as a Prometheus server would read it.
func scrapeMetrics(t *testing.T, httpAddr string) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	status, body, err := httpGet(t, "http://"+httpAddr+"/metrics")
	if err != nil {
		return nil, err
	}
	if status != 200 {
		return nil, fmt.Errorf("GET /metrics: status %d: %s", status, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w\n%s", err, body)
	}
	return mfs, nil
}

// mustScrape is scrapeMetrics that fails the test on an error.
func mustScrape(t *testing.T, httpAddr string) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := scrapeMetrics(t, httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// labelsOf returns a series' labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// seriesOf returns the series of mf whose labels are labels, or nil.
func seriesOf(mf *dto.MetricFamily, labels map[string]string) *dto.Metric {
	for _, m := range mf.GetMetric() {
		if maps.Equal(labelsOf(m), labels) {
			return m
		}
	}
	return nil
}

// valueOf returns a series' value: a counter's or a gauge's, or the count
// of a histogram's observations.
func valueOf(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// checkFamily checks that mfs has a family name of type typ whose every
// series has exactly the label names labels, and returns it.
func checkFamily(t *testing.T, mfs map[string]*dto.MetricFamily, name string, typ dto.MetricType, labels []string) *dto.MetricFamily {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		t.Errorf("/metrics has no %s", name)
		return nil
	}
	if mf.GetType() != typ {
		t.Errorf("%s is a %v, want a %v", name, mf.GetType(), typ)
	}
	for _, m := range mf.GetMetric() {
		if got := slices.Sorted(maps.Keys(labelsOf(m))); !slices.Equal(got, labels) {
			t.Errorf("%s series %v: labels %q, want %q", name, labelsOf(m), got, labels)
		}
	}
	return mf
}

// series is one series a test expects and its value.
type series struct {
	labels map[string]string
	value  float64 // a histogram's: its count of observations
}

// TestMetricsLoneAgent drives a lone agent's rules through every result,
// and Envoy's service beside them, then reads /metrics as Prometheus does
// and checks the families of the README's Metrics table: type, label
// names and, for what the test drove, values. The per-peer families, of
// which a lone node has no series, are TestMetricsPeers'.
func TestMetricsLoneAgent(t *testing.T) {
	config := writeFile(t, "sluice.yaml", metricsTestConfig)
	envoy := writeFile(t, "edge.yaml", metricsEnvoyConfig)
	// The clock stands still, 2 s into a 10 s window and a minute: no
	// window ends while the test counts.
	now := time.Unix(0, agentTestEpoch+int64(2*time.Second))
	a := startTestAgentArgs(t, func() time.Time { return now }, "--config", config, "--envoy-config", envoy,
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	rls, limiter := envoyClient(t, a.GRPCAddr())
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()

	// The agent starts once its strict group has elected its one voter,
	// or a while has passed; a strict check without a leader would be
	// answered by the rule's fail mode, so make sure of it.
	waitUntil(t, patience, "the strict group to elect a leader", func() (bool, string) {
		mfs, err := scrapeMetrics(t, a.HTTPAddr())
		if err != nil {
			return false, err.Error()
		}
		mf := mfs["sluice_strict_leader_changes_total"]
		return len(mf.GetMetric()) == 1 && valueOf(mf.GetMetric()[0]) >= 1, fmt.Sprint(mf)
	})

	// One reload that takes the file again, one of a file that no longer
	// parses (it leaves the rules alone).
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a.reload(ctx, config, log)
	if err := os.WriteFile(config, []byte("rules: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.reload(ctx, config, log)

	checks := []struct {
		rule         string
		hits         int64
		wantCode     codes.Code
		wantAllowed  bool
		wantShadowed bool
		wantPath     string
	}{
		{"batched", 1, codes.OK, true, false, "local"},
		{"batched", 1, codes.OK, true, false, "local"},
		{"batched", 1, codes.OK, true, false, "local"},
		{"batched", 1, codes.OK, false, false, "local"},
		{"batched", 4, codes.InvalidArgument, false, false, ""}, // more hits than the rule's count
		{"strict", 1, codes.OK, true, false, "strict"},
		{"strict", 1, codes.OK, true, false, "strict"},
		{"strict", 1, codes.OK, false, false, "strict"},
		{"shadowed", 1, codes.OK, true, false, "local"},
		{"shadowed", 1, codes.OK, true, true, "local"},
		{"shadowed", 1, codes.OK, true, true, "local"},
		{"nope", 1, codes.NotFound, false, false, ""},
	}
	for i, c := range checks {
		d, err := limiter.Check(ctx, &sluicev1.CheckRequest{Rule: c.rule, Key: "k", Hits: c.hits})
		if code := status.Code(err); code != c.wantCode {
			t.Fatalf("check %d (%s, %d hits): %v, want code %v", i, c.rule, c.hits, err, c.wantCode)
		}
		if err == nil && (d.GetAllowed() != c.wantAllowed || d.GetShadowed() != c.wantShadowed || d.GetPath() != c.wantPath) {
			t.Fatalf("check %d (%s, %d hits): %v; want allowed %v, shadowed %v, path %s",
				i, c.rule, c.hits, d, c.wantAllowed, c.wantShadowed, c.wantPath)
		}
	}

	// Two batches past a bound: refused before any check is decided, so
	// counted in sluice_requests_refused_total alone.
	tooMany := &sluicev1.CheckBatchRequest{Checks: make([]*sluicev1.CheckRequest, 1001)}
	for i := range tooMany.Checks {
		tooMany.Checks[i] = &sluicev1.CheckRequest{Rule: "batched", Key: "k", Hits: 1}
	}
	longKey := &sluicev1.CheckBatchRequest{Checks: []*sluicev1.CheckRequest{{Rule: "batched", Key: strings.Repeat("k", 1025), Hits: 1}}}
	for _, b := range []*sluicev1.CheckBatchRequest{tooMany, longKey} {
		if _, err := limiter.CheckBatch(ctx, b); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a batch past a bound: %v, want InvalidArgument", err)
		}
	}

	requests := []struct {
		value    string // the descriptor's generic_key
		domain   string
		wantCode rlsv3.RateLimitResponse_Code
		wantErr  codes.Code
	}{
		{"two", "edge", rlsv3.RateLimitResponse_OK, codes.OK},
		{"two", "edge", rlsv3.RateLimitResponse_OK, codes.OK},
		{"two", "edge", rlsv3.RateLimitResponse_OVER_LIMIT, codes.OK},
		{"shadowed", "edge", rlsv3.RateLimitResponse_OK, codes.OK},
		{"shadowed", "edge", rlsv3.RateLimitResponse_OK, codes.OK}, // over its limit, in shadow mode
		{"two", "", rlsv3.RateLimitResponse_UNKNOWN, codes.InvalidArgument},
	}
	for i, r := range requests {
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: r.domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: r.value}}}}})
		if code := status.Code(err); code != r.wantErr || resp.GetOverallCode() != r.wantCode {
			t.Fatalf("Envoy request %d (%s): %v, %v; want %v, code %v", i, r.value, resp, err, r.wantCode, r.wantErr)
		}
	}

	mfs := mustScrape(t, a.HTTPAddr())
	decision := func(rule, result, path string, v float64) series {
		return series{map[string]string{"rule": rule, "result": result, "path": path}, v}
	}
	one := func(name, value string, v float64) series { return series{map[string]string{name: value}, v} }
	tests := []struct {
		name   string
		typ    dto.MetricType
		labels []string // every series', sorted
		want   []series // series the test drove, by their labels
	}{
		{"sluice_decisions_total", dto.MetricType_COUNTER, []string{"path", "result", "rule"}, []series{
			decision("batched", "allowed", "local", 3),
			decision("batched", "refused", "local", 1),
			decision("batched", "shadow_refused", "local", 0),
			decision("batched", "error", "local", 1),
			decision("strict", "allowed", "strict", 2),
			decision("strict", "refused", "strict", 1),
			decision("strict", "error", "strict", 0),
			// A strict rule's fail mode (local) has its series from the
			// first scrape, zeros while the group has a leader.
			decision("strict", "allowed", "fail-local", 0),
			decision("strict", "refused", "fail-local", 0),
			decision("shadowed", "allowed", "local", 1),
			decision("shadowed", "shadow_refused", "local", 2),
			decision("shadowed", "refused", "local", 0),
			decision("edge.generic_key_two", "allowed", "local", 2),
			decision("edge.generic_key_two", "refused", "local", 1),
			// Envoy's shadow_mode is not a rule's: its limit is counted
			// as enforced, and a refusal is a refusal that the service
			// answers OK (sluice_envoy_shadow_over_limit_total).
			decision("edge.generic_key_shadowed", "allowed", "local", 1),
			decision("edge.generic_key_shadowed", "refused", "local", 1),
			decision("edge.generic_key_shadowed", "shadow_refused", "local", 0),
		}},
		// Every strict check is timed; a lone node borrows from no owner,
		// and its strict group had a leader for every check.
		{"sluice_decision_duration_seconds", dto.MetricType_HISTOGRAM, []string{"path"}, []series{
			one("path", "strict", 3),
			one("path", "borrow", 0),
			one("path", "fail-open", 0),
			one("path", "fail-closed", 0),
			one("path", "fail-local", 0),
		}},
		{"sluice_keys", dto.MetricType_GAUGE, []string{"rule"}, []series{
			one("rule", "batched", 1),
			one("rule", "strict", 1), // in the strict log's state machine
			one("rule", "shadowed", 1),
			one("rule", "edge.generic_key_two", 1),
			one("rule", "edge.generic_key_shadowed", 1),
		}},
		{"sluice_keys_evicted_total", dto.MetricType_COUNTER, []string{"rule"}, []series{
			one("rule", "batched", 0),
			one("rule", "strict", 0),
		}},
		{"sluice_requests_refused_total", dto.MetricType_COUNTER, []string{"reason"}, []series{
			one("reason", "batch_size", 1),
			one("reason", "key_length", 1),
			one("reason", "rule_length", 0),
			one("reason", "message_size", 0),
			one("reason", "delta_size", 0),
		}},
		{"sluice_members", dto.MetricType_GAUGE, []string{"state"}, []series{
			one("state", "alive", 1),
			one("state", "suspect", 0),
			one("state", "failed", 0),
		}},
		{"sluice_ready", dto.MetricType_GAUGE, nil, []series{{nil, 1}}},
		// Each strict check was one log entry: the next was sent once the
		// last was answered.
		{"sluice_strict_apply_duration_seconds", dto.MetricType_HISTOGRAM, nil, []series{{nil, 3}}},
		{"sluice_strict_leader_changes_total", dto.MetricType_COUNTER, nil, []series{{nil, 1}}},
		{"sluice_strict_forwarded_checks_total", dto.MetricType_COUNTER, nil, []series{{nil, 0}}},
		{"sluice_config_reloads_total", dto.MetricType_COUNTER, []string{"result"}, []series{
			one("result", "ok", 1),
			one("result", "error", 1),
		}},
		{"sluice_shadow_refusals_total", dto.MetricType_COUNTER, nil, []series{{nil, 2}}},
		{"sluice_unknown_rule_checks_total", dto.MetricType_COUNTER, nil, []series{{nil, 1}}},
		{"sluice_envoy_requests_total", dto.MetricType_COUNTER, []string{"code"}, []series{
			one("code", "OK", 4),
			one("code", "OVER_LIMIT", 1),
		}},
		{"sluice_envoy_request_errors_total", dto.MetricType_COUNTER, nil, []series{{nil, 1}}},
		{"sluice_envoy_shadow_over_limit_total", dto.MetricType_COUNTER, nil, []series{{nil, 1}}},
		// Node-wide ones of earlier releases the test drove.
		{"sluice_strict_entries_total", dto.MetricType_COUNTER, nil, []series{{nil, 3}}},
		{"sluice_strict_checks_total", dto.MetricType_COUNTER, nil, []series{{nil, 3}}},
		{"sluice_strict_failovers_total", dto.MetricType_COUNTER, nil, []series{{nil, 0}}},
		{"sluice_peers", dto.MetricType_GAUGE, nil, []series{{nil, 0}}},
		{"sluice_borrows_total", dto.MetricType_COUNTER, nil, []series{{nil, 0}}},
		// Beside the node's, Go's runtime and the process.
		{"go_goroutines", dto.MetricType_GAUGE, nil, nil},
		{"process_resident_memory_bytes", dto.MetricType_GAUGE, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mf := checkFamily(t, mfs, tt.name, tt.typ, tt.labels)
			if mf == nil {
				return
			}
			for _, w := range tt.want {
				m := seriesOf(mf, w.labels)
				if m == nil {
					t.Errorf("no series %v among %v", w.labels, mf.GetMetric())
					continue
				}
				if got := valueOf(m); got != w.value {
					t.Errorf("series %v = %v, want %v", w.labels, got, w.value)
				}
			}
		})
	}

	t.Run("local latency is sampled", func(t *testing.T) {
		// About one local check in 64 is timed, so the count is not known;
		// it is at most the local checks decided.
		var local float64
		for _, m := range mfs["sluice_decisions_total"].GetMetric() {
			if l := labelsOf(m); l["path"] == "local" && l["result"] != "error" {
				local += valueOf(m)
			}
		}
		m := seriesOf(mfs["sluice_decision_duration_seconds"], map[string]string{"path": "local"})
		if m == nil || valueOf(m) > local {
			t.Errorf("local latency %v, want at most the %v local decisions", m, local)
		}
	})

	t.Run("shadow refusals are the sum of shadow_refused", func(t *testing.T) {
		var sum float64
		for _, m := range mfs["sluice_decisions_total"].GetMetric() {
			if labelsOf(m)["result"] == "shadow_refused" {
				sum += valueOf(m)
			}
		}
		got := mfs["sluice_shadow_refusals_total"].GetMetric()
		if len(got) != 1 || valueOf(got[0]) != sum {
			t.Errorf("sluice_shadow_refusals_total %v, want the sum of result=\"shadow_refused\", %v", got, sum)
		}
	})

	t.Run("no peers", func(t *testing.T) {
		// The per-peer families have no series on a lone node, so the
		// parser, which drops empty families, has none.
		for _, name := range []string{"sluice_peer_sync_messages_sent_total", "sluice_peer_sync_bytes_sent_total",
			"sluice_peer_sync_messages_received_total", "sluice_peer_sync_bytes_received_total",
			"sluice_peer_round_trip_seconds"} {
			if mf := mfs[name]; mf != nil {
				t.Errorf("a lone node has %s: %v", name, mf.GetMetric())
			}
		}
	})
}

// metricsPairConfig is a batched rule whose keys have owners (allocation
// owner, the default), with room for every check a test sends.
const metricsPairConfig = `rules:
  - name: api
    count: 100000
    time_window: 3600
    sync_interval: 0.1
`

// startMetricsPair starts two agents, metrics-a and metrics-b, that join,
// both with metricsEnvoyConfig's limits; metrics-a serves /metrics. It
// sends checks of api to metrics-a, a key at a time, until metrics-a has
// measured its round trip to metrics-b as the owner of some of them, so
// that every per-peer family has its series, and returns metrics-a.
func startMetricsPair(t *testing.T) *agent {
	t.Helper()
	config := writeFile(t, "sluice.yaml", metricsPairConfig)
	envoy := writeFile(t, "edge.yaml", metricsEnvoyConfig)
	common := []string{"--config", config, "--envoy-config", envoy, "--grpc-addr", "127.0.0.1:0",
		"--gossip-addr", "127.0.0.1:0", "--shutdown-timeout", "2s"}
	a := startTestAgentArgs(t, nil, append(common, "--name", "metrics-a", "--http-addr", "127.0.0.1:0")...)
	startTestAgentArgs(t, nil, append(common, "--name", "metrics-b", "--join", a.GossipAddr())...)
	_, limiter := envoyClient(t, a.GRPCAddr())
	peer := map[string]string{"peer": "metrics-b"}
	i := 0
	waitUntil(t, patience, "metrics-a to measure its round trip to metrics-b", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		// A key metrics-b owns is reported to it at the next sync, and
		// its answer times the round trip.
		if _, err := limiter.Check(ctx, &sluicev1.CheckRequest{Rule: "api", Key: fmt.Sprintf("k%d", i), Hits: 1}); err != nil {
			return false, err.Error()
		}
		i++
		mfs, err := scrapeMetrics(t, a.HTTPAddr())
		if err != nil {
			return false, err.Error()
		}
		rtt := seriesOf(mfs["sluice_peer_round_trip_seconds"], peer)
		return rtt != nil && valueOf(rtt) > 0, fmt.Sprint(mfs["sluice_peer_round_trip_seconds"])
	})
	return a
}

// TestMetricsPeers checks the per-peer families on a node with a peer:
// each has one series, labelled with the peer's name, counting the
// traffic the test made.
func TestMetricsPeers(t *testing.T) {
	a := startMetricsPair(t)
	// Each scrape pings the members; one that a busy machine answers late
	// counts as suspect in that scrape alone.
	var mfs map[string]*dto.MetricFamily
	waitUntil(t, patience, "metrics-a's /metrics to count 2 alive members", func() (bool, string) {
		var err error
		if mfs, err = scrapeMetrics(t, a.HTTPAddr()); err != nil {
			return false, err.Error()
		}
		m := seriesOf(mfs["sluice_members"], map[string]string{"state": "alive"})
		return m != nil && valueOf(m) == 2, fmt.Sprint(mfs["sluice_members"])
	})
	peer := map[string]string{"peer": "metrics-b"}
	tests := []struct {
		name string
		typ  dto.MetricType
	}{
		{"sluice_peer_sync_messages_sent_total", dto.MetricType_COUNTER},
		{"sluice_peer_sync_bytes_sent_total", dto.MetricType_COUNTER},
		{"sluice_peer_sync_messages_received_total", dto.MetricType_COUNTER},
		{"sluice_peer_sync_bytes_received_total", dto.MetricType_COUNTER},
		{"sluice_peer_round_trip_seconds", dto.MetricType_GAUGE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mf := checkFamily(t, mfs, tt.name, tt.typ, []string{"peer"})
			if mf == nil {
				return
			}
			// The round trip was measured; the reports that measured it
			// went to metrics-b, and its answers came back.
			if len(mf.GetMetric()) != 1 || seriesOf(mf, peer) == nil || valueOf(mf.GetMetric()[0]) <= 0 {
				t.Errorf("series %v, want one of peer=\"metrics-b\" above 0", mf.GetMetric())
			}
		})
	}
}

// readmeMetric is a metric as a row of the README's Metrics tables lists
// it.
type readmeMetric struct {
	typ    string   // counter, gauge or histogram
	labels []string // sorted
}

var (
	// readmeCode is a name in backquotes.
	readmeCode = regexp.MustCompile("`([^`]+)`")
	// readmeAside is a parenthesis in a labels cell: the label's values.
	readmeAside = regexp.MustCompile(`\([^)]*\)`)
)

// readmeMetrics parses the rows of the tables in the README's Metrics
// section that list sluice's metrics: `| \`name\`[, \`name\`…] | type |
// labels | what it counts |`, each label in backquotes, its values in a
// parenthesis after it.
func readmeMetrics(t *testing.T) map[string]readmeMetric {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Metrics\n")
	if !ok {
		t.Fatal("README.md has no Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string]readmeMetric{}
	for i, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `sluice_") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) != 6 {
			t.Errorf("README Metrics line %d has %d cells, want 4: %s", i+1, len(cells)-2, line)
			continue
		}
		m := readmeMetric{typ: strings.TrimSpace(cells[2])}
		for _, l := range readmeCode.FindAllStringSubmatch(readmeAside.ReplaceAllString(cells[3], ""), -1) {
			m.labels = append(m.labels, l[1])
		}
		slices.Sort(m.labels)
		for _, name := range readmeCode.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := out[name[1]]; dup {
				t.Errorf("README lists %s twice", name[1])
			}
			out[name[1]] = m
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md's Metrics section lists no sluice_ metric")
	}
	return out
}

// TestMetricsREADME checks that the README's Metrics tables and an
// agent's /metrics agree: every sluice_ family the agent serves is listed,
// with its type and label names, and every one listed is served. The
// agent has a peer whose round trip it measured and Envoy's service, so
// that every family has a series.
func TestMetricsREADME(t *testing.T) {
	readme := readmeMetrics(t)
	a := startMetricsPair(t)
	served := map[string]readmeMetric{}
	for name, mf := range mustScrape(t, a.HTTPAddr()) {
		if !strings.HasPrefix(name, "sluice_") {
			continue
		}
		m := readmeMetric{typ: strings.ToLower(mf.GetType().String())}
		for i, s := range mf.GetMetric() {
			labels := slices.Sorted(maps.Keys(labelsOf(s)))
			if i > 0 && !slices.Equal(labels, m.labels) {
				t.Errorf("%s: series with labels %q and %q", name, m.labels, labels)
			}
			m.labels = labels
		}
		served[name] = m
	}
	for _, name := range slices.Sorted(maps.Keys(served)) {
		got := served[name]
		want, ok := readme[name]
		switch {
		case !ok:
			t.Errorf("/metrics serves %s (%s, labels %q), which README.md's Metrics tables do not list", name, got.typ, got.labels)
		case got.typ != want.typ || !slices.Equal(got.labels, want.labels):
			t.Errorf("%s: /metrics has a %s with labels %q, README.md a %s with labels %q",
				name, got.typ, got.labels, want.typ, want.labels)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(readme)) {
		if _, ok := served[name]; !ok {
			t.Errorf("README.md lists %s, which /metrics does not serve", name)
		}
	}
}
