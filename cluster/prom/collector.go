// Package prom exports a sluice node's metrics to Prometheus: NewCollector
// returns a prometheus.Collector for a *cluster.Node, which a program
// registers in a registry of its own and serves with promhttp, as the
// agent (cmd/sluice) does at /metrics:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(prom.NewCollector(node))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// It is a package of its own, not part of cluster, so that a program that
// embeds a node and exports no metrics links no Prometheus client: the
// collector reads what the node counts (cluster.Node's Metrics, RuleStats,
// PeerStats, MemberStates, DecisionLatency and StrictApplyLatency) at each
// scrape, and the node counts without it. It never registers anything in
// the global registry.
//
// The metrics, their labels and what they count are listed in the README
// (section Metrics).
package prom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// memberPingTimeout bounds the pings a scrape sends to tell suspect
// members (cluster.Node.MemberStates).
const memberPingTimeout = time.Second

// collector exports one node's metrics.
type collector struct {
	n *cluster.Node

	// node-wide series of cluster.Metrics, by name, in Series order; the
	// sluice_members gauge among them is replaced by members.
	series []*prometheus.Desc
	// the node-clock gauges in seconds, beside their nanosecond forms.
	clockCorrection, lastSave, writtenThrough *prometheus.Desc

	members, ready       *prometheus.Desc
	decisions, latency   *prometheus.Desc
	keys, keysEvicted    *prometheus.Desc
	peerSent, peerBytes  *prometheus.Desc
	peerRecv, peerBytesR *prometheus.Desc
	peerRTT              *prometheus.Desc
	strictApply          *prometheus.Desc
}

// NewCollector returns a collector of n's metrics. Each scrape reads the
// node's counts afresh; the collector holds no state of its own, and goes
// on answering, with the last counts, after the node closes.
func NewCollector(n *cluster.Node) prometheus.Collector {
	c := &collector{n: n}
	var zero cluster.Metrics
	last := ""
	for _, s := range zero.Series() {
		if s.Name == last {
			continue
		}
		last = s.Name
		var labels []string
		if s.Label != "" {
			labels = []string{s.Label}
		}
		if s.Name == membersName {
			c.series = append(c.series, nil)
			continue
		}
		c.series = append(c.series, prometheus.NewDesc(s.Name, s.Help, labels, nil))
	}
	c.members = prometheus.NewDesc(membersName,
		"Cluster members by state as this node sees them, itself included: alive, suspect (listed by gossip, but not answering a ping) or failed (gone, being reconnected).",
		[]string{"state"}, nil)
	c.ready = prometheus.NewDesc("sluice_ready",
		"1 once the node holds the fleet's state (it pulled it from a peer, or is alone), 0 before and while closing.", nil, nil)
	c.clockCorrection = prometheus.NewDesc("sluice_clock_correction_seconds",
		"What this node adds to its own clock to decide on the fleet's.", nil, nil)
	c.lastSave = prometheus.NewDesc("sluice_last_save_timestamp_seconds",
		"Node-clock time of the counts in the last completed save; a crash loses what was admitted after it.", nil, nil)
	c.writtenThrough = prometheus.NewDesc("sluice_sync_written_through_timestamp_seconds",
		"Node-clock time up to which this node's counts have been written to every live peer (0 without peers); now minus this is the sync lag.", nil, nil)
	c.decisions = prometheus.NewDesc("sluice_decisions_total",
		"Checks by rule, result (allowed, refused, shadow_refused, error) and the path that decided them (local, strict, fail-open, fail-closed, fail-local); a rule with several limits counts each check once, under its own name.",
		[]string{"rule", "result", "path"}, nil)
	c.latency = prometheus.NewDesc("sluice_decision_duration_seconds",
		"Time from a check's start to its decision, by path. Local checks are sampled: about 1 in 64 is timed, chosen by its start time. borrow is a local check that waited for its key's owner; borrow, strict and fail-* checks are all timed.",
		[]string{"path"}, nil)
	c.keys = prometheus.NewDesc("sluice_keys",
		"Keys this node holds, by rule; a rule with several limits has one series per limit (rule, rule#2, …).",
		[]string{"rule"}, nil)
	c.keysEvicted = prometheus.NewDesc("sluice_keys_evicted_total",
		"Keys evicted, by rule (one series per limit, as sluice_keys), to keep the node within its max_keys: the rule holding the most keys gives one up, the one it used least recently, for each new key past the bound.",
		[]string{"rule"}, nil)
	c.peerSent = prometheus.NewDesc("sluice_peer_sync_messages_sent_total",
		"Sync messages written to the peer's stream, by peer.", []string{"peer"}, nil)
	c.peerBytes = prometheus.NewDesc("sluice_peer_sync_bytes_sent_total",
		"Bytes of sync messages written to the peer's stream, by peer.", []string{"peer"}, nil)
	c.peerRecv = prometheus.NewDesc("sluice_peer_sync_messages_received_total",
		"Sync messages merged from the peer, by peer.", []string{"peer"}, nil)
	c.peerBytesR = prometheus.NewDesc("sluice_peer_sync_bytes_received_total",
		"Bytes of sync messages merged from the peer, by peer.", []string{"peer"}, nil)
	c.peerRTT = prometheus.NewDesc("sluice_peer_round_trip_seconds",
		"Round trip of the peer's answers as owner of keys this node asked it about, smoothed (each answer weighs an eighth); absent until one is measured.",
		[]string{"peer"}, nil)
	c.strictApply = prometheus.NewDesc("sluice_strict_apply_duration_seconds",
		"Time from Raft's Apply to the application of the strict log entries this node committed as leader.", nil, nil)
	return c
}

// membersName is the metric the collector splits by state.
const membersName = "sluice_members"

// Describe sends every metric's description: the collector's metrics are
// all known in advance.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.series {
		if d != nil {
			ch <- d
		}
	}
	for _, d := range []*prometheus.Desc{c.members, c.ready, c.clockCorrection, c.lastSave, c.writtenThrough,
		c.decisions, c.latency, c.keys, c.keysEvicted, c.peerSent, c.peerBytes, c.peerRecv, c.peerBytesR, c.peerRTT, c.strictApply} {
		ch <- d
	}
}

// Collect reads the node's counts and sends them.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.collectNode(ch)
	c.collectRules(ch)
	c.collectPeers(ch)
	for _, pl := range c.n.DecisionLatency() {
		ch <- histogram(c.latency, pl.Latency, pl.Path)
	}
	ch <- histogram(c.strictApply, c.n.StrictApplyLatency())
}

// collectNode sends the node-wide metrics.
func (c *collector) collectNode(ch chan<- prometheus.Metric) {
	m := c.n.Metrics()
	i, last := -1, ""
	for _, s := range m.Series() {
		if s.Name != last {
			i, last = i+1, s.Name
		}
		d := c.series[i]
		if d == nil {
			continue // sluice_members, by state below
		}
		kind := prometheus.GaugeValue
		if s.Counter {
			kind = prometheus.CounterValue
		}
		var labels []string
		if s.Label != "" {
			labels = []string{s.LabelValue}
		}
		send(ch, d, kind, float64(s.Value), labels...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), memberPingTimeout)
	defer cancel()
	ms := c.n.MemberStates(ctx)
	for _, st := range []struct {
		state string
		n     int
	}{{"alive", ms.Alive}, {"suspect", ms.Suspect}, {"failed", ms.Failed}} {
		send(ch, c.members, prometheus.GaugeValue, float64(st.n), st.state)
	}
	ready := 0.0
	if c.n.Ready() {
		ready = 1
	}
	send(ch, c.ready, prometheus.GaugeValue, ready)
	send(ch, c.clockCorrection, prometheus.GaugeValue, seconds(m.ClockCorrection))
	send(ch, c.lastSave, prometheus.GaugeValue, seconds(m.LastSaveAt))
	send(ch, c.writtenThrough, prometheus.GaugeValue, seconds(m.SyncedThrough))
}

// collectRules sends each rule's checks and keys. A rule's own path (local
// for a batched rule, strict for a strict one, and its fail mode's) is
// sent with every result, zeros included, so that a rate is defined from
// the first scrape; other paths once they have counted anything, as after
// a rule moved between batched and strict.
func (c *collector) collectRules(ch chan<- prometheus.Metric) {
	for _, st := range c.n.RuleStats() {
		own := []window.Path{window.PathLocal}
		if st.Rule.IsStrict() {
			own = []window.Path{window.PathStrict, failPath(st.Rule.FailMode)}
		}
		for p := range len(st.Decisions) {
			path := window.Path(p)
			always := false
			for _, o := range own {
				always = always || o == path
			}
			for r := range len(st.Decisions[p]) {
				v := st.Decisions[p][r]
				if v == 0 && !always {
					continue
				}
				send(ch, c.decisions, prometheus.CounterValue, float64(v),
					st.Rule.Name, cluster.Result(r).String(), path.String())
			}
		}
		for _, k := range st.Keys {
			send(ch, c.keys, prometheus.GaugeValue, float64(k.Keys), k.Name)
			send(ch, c.keysEvicted, prometheus.CounterValue, float64(k.Evicted), k.Name)
		}
	}
}

// failPath is the path a strict rule's fail mode answers on.
func failPath(m window.FailMode) window.Path {
	switch m {
	case window.FailOpen:
		return window.PathFailOpen
	case window.FailClosed:
		return window.PathFailClosed
	}
	return window.PathFailLocal
}

// collectPeers sends each live peer's sync traffic and round trip.
func (c *collector) collectPeers(ch chan<- prometheus.Metric) {
	for _, p := range c.n.PeerStats() {
		send(ch, c.peerSent, prometheus.CounterValue, float64(p.DeltasSent), p.Name)
		send(ch, c.peerBytes, prometheus.CounterValue, float64(p.BytesSent), p.Name)
		send(ch, c.peerRecv, prometheus.CounterValue, float64(p.DeltasReceived), p.Name)
		send(ch, c.peerBytesR, prometheus.CounterValue, float64(p.BytesReceived), p.Name)
		if p.RoundTrip > 0 {
			send(ch, c.peerRTT, prometheus.GaugeValue, p.RoundTrip.Seconds(), p.Name)
		}
	}
}

// send sends one series. A label value the exposition format cannot
// carry (a peer's name that is not UTF-8: names come from gossip) fails
// that series alone, at the scrape, rather than the process.
func send(ch chan<- prometheus.Metric, d *prometheus.Desc, kind prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, kind, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// histogram is h as a Prometheus histogram in seconds.
func histogram(d *prometheus.Desc, h cluster.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Buckets))
	for _, b := range h.Buckets {
		buckets[b.UpperBound.Seconds()] = b.Count
	}
	m, err := prometheus.NewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// seconds turns nanoseconds into seconds.
func seconds(ns int64) float64 { return float64(ns) / float64(time.Second) }
