package prom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// legacyUnits are the metrics whose names predate this collector and name
// a unit Prometheus wants in seconds; they keep their names for the
// dashboards built on them, beside a _seconds form.
var legacyUnits = []string{
	"sluice_clock_correction_nanoseconds",
	"sluice_last_save_timestamp_nanoseconds",
	"sluice_sync_written_through_timestamp_nanoseconds",
}

// registryOf is a pedantic registry holding n's collector alone: it checks
// that every metric collected matches a description sent.
func registryOf(t *testing.T, n *cluster.Node) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(n)); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

// lint gathers reg and fails on any lint problem but legacyUnits'.
func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("GatherAndLint: %v", err)
	}
	for _, p := range problems {
		if slices.Contains(legacyUnits, p.Metric) && strings.Contains(p.Text, "base unit") {
			continue
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// value returns the value of the series of metric name whose labels
// include want, and whether there is one; a histogram's value is its count.
func value(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				if !hasLabel(m, k, v) {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabel(m *dto.Metric, name, val string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == val
		}
	}
	return false
}

// check is one expected series and its value.
type check struct {
	name   string
	labels map[string]string
	want   float64
}

func expect(t *testing.T, reg prometheus.Gatherer, checks []check) {
	t.Helper()
	for _, c := range checks {
		got, ok := value(t, reg, c.name, c.labels)
		switch {
		case !ok:
			t.Errorf("%s%v: no such series", c.name, c.labels)
		case got != c.want:
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func decisions(rule, result, path string, want float64) check {
	return check{"sluice_decisions_total", map[string]string{"rule": rule, "result": result, "path": path}, want}
}

// TestCollectorLoneNode makes known checks on a lone node, of a batched
// rule, one with two limits, one in shadow mode and a strict one, reloads
// it, and reads the counts back through a real registry.
func TestCollectorLoneNode(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	rules := []window.Rule{
		{Name: "api", Count: 2, Window: 10 * time.Second},
		{Name: "multi", Count: 5, Window: 10 * time.Second, Type: window.Fixed,
			Also: []window.Limit{{Count: 3, Window: time.Minute, Type: window.Sliding}}},
		{Name: "dry", Count: 1, Window: 10 * time.Second, Shadow: true},
		{Name: "pay", Count: 1, Window: 10 * time.Second, SyncInterval: window.Strict},
	}
	ctx := context.Background()
	n, err := cluster.Start(ctx, cluster.Config{Name: "lone", Rules: rules, Strict: strict.Mode{},
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	reg := registryOf(t, n)

	for _, c := range []struct {
		rule, key string
		times     int
		wantErr   bool
	}{
		{"api", "user:1", 3, false},   // 2 allowed, 1 refused
		{"api", "", 1, true},          // an error: empty key
		{"multi", "user:1", 4, false}, // 3 allowed (the second limit), 1 refused
		{"dry", "user:1", 2, false},   // 1 allowed, 1 shadow refusal
		{"pay", "user:1", 2, false},   // through the log: 1 allowed, 1 refused
		{"nope", "user:1", 1, true},   // no such rule
	} {
		for range c.times {
			_, err := n.Allow(ctx, c.rule, c.key, 1)
			if (err != nil) != c.wantErr {
				t.Fatalf("Allow(%q, %q): %v, want an error: %v", c.rule, c.key, err, c.wantErr)
			}
		}
	}
	if err := n.Reload(ctx, rules); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if err := n.Reload(ctx, nil); err == nil {
		t.Fatal("Reload with no rules: no error")
	}

	expect(t, reg, []check{
		decisions("api", "allowed", "local", 2),
		decisions("api", "refused", "local", 1),
		decisions("api", "error", "local", 1),
		decisions("api", "shadow_refused", "local", 0),
		decisions("multi", "allowed", "local", 3),
		decisions("multi", "refused", "local", 1),
		decisions("dry", "allowed", "local", 1),
		decisions("dry", "shadow_refused", "local", 1),
		decisions("dry", "refused", "local", 0),
		decisions("pay", "allowed", "strict", 1),
		decisions("pay", "refused", "strict", 1),
		decisions("pay", "allowed", "fail-local", 0),
		{"sluice_shadow_refusals_total", nil, 1},
		{"sluice_unknown_rule_checks_total", nil, 1},
		{"sluice_keys", map[string]string{"rule": "api"}, 1},
		{"sluice_keys", map[string]string{"rule": "multi"}, 1},
		{"sluice_keys", map[string]string{"rule": "multi#2"}, 1},
		{"sluice_keys", map[string]string{"rule": "dry"}, 1},
		{"sluice_config_reloads_total", map[string]string{"result": "ok"}, 1},
		{"sluice_config_reloads_total", map[string]string{"result": "error"}, 1},
		{"sluice_members", map[string]string{"state": "alive"}, 1},
		{"sluice_members", map[string]string{"state": "suspect"}, 0},
		{"sluice_members", map[string]string{"state": "failed"}, 0},
		{"sluice_ready", nil, 1},
		// Every strict check is timed; the log committed at least one
		// entry as leader, after electing itself.
		{"sluice_decision_duration_seconds", map[string]string{"path": "strict"}, 2},
		{"sluice_decision_duration_seconds", map[string]string{"path": "borrow"}, 0},
	})
	for _, name := range []string{"sluice_strict_apply_duration_seconds", "sluice_strict_leader_changes_total"} {
		if v, ok := value(t, reg, name, nil); !ok || v < 1 {
			t.Errorf("%s = %v (present %v), want at least 1", name, v, ok)
		}
	}
	// No series of a part: a rule with several limits counts under its name.
	if _, ok := value(t, reg, "sluice_decisions_total", map[string]string{"rule": "multi#2"}); ok {
		t.Error("sluice_decisions_total has a series for the part multi#2")
	}
	lint(t, reg)
}

// TestCollectorCluster reads the metrics of two nodes in a fleet: each
// counts its own checks, sees both members alive and reports its traffic
// with the other by the peer's name.
func TestCollectorCluster(t *testing.T) {
	rules := []window.Rule{{Name: "api", Count: 1000, Window: 10 * time.Second}}
	nodes := startFleet(t, 2, rules)
	regs := []*prometheus.Registry{registryOf(t, nodes[0]), registryOf(t, nodes[1])}
	ctx := context.Background()
	for i, times := range []int{5, 3} {
		for range times {
			if d, err := nodes[i].Allow(ctx, "api", "user:1", 1); err != nil || !d.Allowed {
				t.Fatalf("node %d: Allow = %+v, %v", i, d, err)
			}
		}
	}
	for i, reg := range regs {
		other := nodes[1-i].Name()
		waitFor(t, func() bool {
			sent, _ := value(t, reg, "sluice_peer_sync_messages_sent_total", map[string]string{"peer": other})
			recv, _ := value(t, reg, "sluice_peer_sync_messages_received_total", map[string]string{"peer": other})
			return sent > 0 && recv > 0
		}, fmt.Sprintf("node %d to count sync messages to and from %s", i, other))
		expect(t, reg, []check{
			decisions("api", "allowed", "local", float64([]int{5, 3}[i])),
			decisions("api", "refused", "local", 0),
			{"sluice_members", map[string]string{"state": "alive"}, 2},
			{"sluice_members", map[string]string{"state": "suspect"}, 0},
			{"sluice_members", map[string]string{"state": "failed"}, 0},
			{"sluice_peers", nil, 1},
			{"sluice_ready", nil, 1},
			{"sluice_keys", map[string]string{"rule": "api"}, 1},
		})
		if v, _ := value(t, reg, "sluice_peer_sync_bytes_sent_total", map[string]string{"peer": other}); v <= 0 {
			t.Errorf("node %d: sync bytes sent to %s = %v, want > 0", i, other, v)
		}
		lint(t, reg)
	}
}

// startFleet starts n nodes on loopback, every one after the first
// joining the first, and waits until each streams to all the others.
func startFleet(t *testing.T, n int, rules []window.Rule) []*cluster.Node {
	t.Helper()
	var nodes []*cluster.Node
	for i := range n {
		var join []string
		if i > 0 {
			join = []string{nodes[0].GossipAddr()}
		}
		nd, err := cluster.Start(context.Background(), cluster.Config{
			Name: fmt.Sprintf("node-%d", i), Rules: rules, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0",
			Join: join, JoinTimeout: 5 * time.Second, ShutdownTimeout: time.Second,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatalf("start node %d: %v", i, err)
		}
		t.Cleanup(func() { nd.Close() })
		nodes = append(nodes, nd)
	}
	waitFor(t, func() bool {
		for _, nd := range nodes {
			if nd.Metrics().Peers != int64(n-1) {
				return false
			}
		}
		return true
	}, "every node to stream to every other")
	return nodes
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCollectorDescribesWhatItCollects checks that every metric collected
// has a description sent by Describe, and that none is described twice:
// a registry refuses a collector otherwise.
func TestCollectorDescribesWhatItCollects(t *testing.T) {
	n, err := cluster.Start(context.Background(), cluster.Config{Name: "d",
		Rules: []window.Rule{{Name: "api", Count: 1, Window: time.Second}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	c := NewCollector(n)
	descs := make(chan *prometheus.Desc, 100)
	c.Describe(descs)
	close(descs)
	described := map[string]bool{}
	for d := range descs {
		if described[d.String()] {
			t.Errorf("described twice: %s", d)
		}
		described[d.String()] = true
	}
	metrics := make(chan prometheus.Metric, 1000)
	c.Collect(metrics)
	close(metrics)
	count := 0
	for m := range metrics {
		count++
		if !described[m.Desc().String()] {
			t.Errorf("collected without a description: %s", m.Desc())
		}
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Errorf("%s: %v", m.Desc(), err)
		}
	}
	if count == 0 {
		t.Fatal("nothing collected")
	}
	// A second registration of the same node's collector in one registry
	// is refused: its metrics would be duplicates.
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(NewCollector(n)); !errors.As(err, &are) {
		t.Errorf("second Register = %v, want AlreadyRegisteredError", err)
	}
}
