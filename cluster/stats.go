package cluster

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cluster/internal/metric"
	"github.com/sluicehq/sluice/window"
)

// This file holds what a node counts per rule, per path and per peer, and
// the snapshots that export it: RuleStats, DecisionLatency, PeerStats,
// MemberStates and StrictApplyLatency. Package cluster/prom turns them into
// Prometheus metrics; this package links no metrics library.

// Result is what came of a check, as the node's metrics count it.
type Result uint8

const (
	// ResultAllowed is a check admitted.
	ResultAllowed Result = iota
	// ResultRefused is a check refused.
	ResultRefused
	// ResultShadowRefused is a check refused by a rule in shadow mode,
	// whose caller was admitted all the same (Decision.Shadowed).
	ResultShadowRefused
	// ResultError is a check that returned an error and decided nothing.
	ResultError
)

// numResults and numPaths size the counts of Decisions: every Result, and
// every window.Path.
const (
	numResults = int(ResultError) + 1
	numPaths   = int(window.PathFailLocal) + 1
)

// String returns the result's name in the metrics: allowed, refused,
// shadow_refused or error.
func (r Result) String() string {
	switch r {
	case ResultAllowed:
		return "allowed"
	case ResultRefused:
		return "refused"
	case ResultShadowRefused:
		return "shadow_refused"
	case ResultError:
		return "error"
	}
	return "unknown"
}

// resultOf is what a decision made of its check.
func resultOf(d *Decision) Result {
	switch {
	case d.Shadowed:
		return ResultShadowRefused
	case d.Allowed:
		return ResultAllowed
	}
	return ResultRefused
}

// Decisions counts a rule's checks by the path that decided them
// (window.Path, the first index) and what came of them (Result, the
// second): d[window.PathLocal][ResultAllowed] are the checks this node
// admitted from its own view. A check that failed counts under the rule's
// own path: PathLocal for a batched rule, PathStrict for a strict one.
type Decisions [numPaths][numResults]uint64

// Of returns the checks decided on path p with result r.
func (d *Decisions) Of(p window.Path, r Result) uint64 {
	if int(p) >= numPaths || int(r) >= numResults {
		return 0
	}
	return d[p][r]
}

// Total returns the checks counted, whatever their path and result.
func (d *Decisions) Total() uint64 {
	var sum uint64
	for p := range d {
		for r := range d[p] {
			sum += d[p][r]
		}
	}
	return sum
}

// countStripes is how many cache lines a rule's node-counted checks are
// spread over, so that cores counting at once rarely share one.
const countStripes = 8

// ruleCounts are a rule's checks the node counts itself: those that do not
// end in its table's tally (strict paths, errors, checks with a ticket:
// reservations and AllowAll's, and rules with several limits). They are
// atomics spread over stripes: unlike a table's tally they have no lock
// of their own to count under.
type ruleCounts struct {
	stripes [countStripes]struct {
		n [numPaths][numResults]atomic.Uint64
		_ [64]byte
	}
}

// add counts one check. The stripe is picked at random, from the
// runtime's per-thread generator, which no core waits on.
func (c *ruleCounts) add(p window.Path, r Result) {
	if int(p) >= numPaths {
		return
	}
	c.stripes[rand.Uint32()%countStripes].n[p][r].Add(1)
}

// read sums the stripes.
func (c *ruleCounts) read() Decisions {
	var d Decisions
	for i := range c.stripes {
		s := &c.stripes[i]
		for p := range s.n {
			for r := range s.n[p] {
				d[p][r] += s.n[p][r].Load()
			}
		}
	}
	return d
}

// countError counts a check of rule that failed; one naming no rule of the
// node counts in Metrics.UnknownRuleChecks instead, so that names from
// outside never become label values.
func (n *Node) countError(x *ruleIndex, rule string) {
	c := x.counts[rule]
	if c == nil {
		n.metrics.UnknownRuleChecks.Add(1)
		return
	}
	p := window.PathLocal
	if r := x.rules[rule]; r.IsStrict() {
		p = window.PathStrict
	}
	c.add(p, ResultError)
}

// countCheck counts a check of rule decided as d, whose rule's table did
// not tally it.
func (n *Node) countCheck(x *ruleIndex, rule string, d *Decision) {
	if c := x.counts[rule]; c != nil {
		c.add(d.Path, resultOf(d))
	}
}

// countStrict counts and times a check that strict mode answered, d or
// err, which started at own on the node's clock. A check that failed is
// timed only if it waited on the log (its outcome is unknown): the others
// failed at once, before deciding anything.
func (n *Node) countStrict(x *ruleIndex, rule string, own int64, d *Decision, err error) {
	if err != nil {
		if errors.Is(err, ErrOutcomeUnknown) {
			n.latency[window.PathStrict].Observe(n.ownNow() - own)
		}
		n.countError(x, rule)
		return
	}
	if int(d.Path) < numPaths {
		n.latency[d.Path].Observe(n.ownNow() - own)
	}
	n.countCheck(x, rule, d)
}

// RuleStats are what a node counted of one of its rules, as of one moment.
type RuleStats struct {
	// Rule is the rule as the node has it.
	Rule window.Rule
	// Decisions counts the rule's checks by path and result: checks of a
	// rule with several limits once each, under the rule's name, not per
	// limit. The counts carry over a Reload that keeps the rule, whatever
	// it changes; a rule removed and added back starts from zero.
	Decisions Decisions
	// Keys is how many keys the node holds for each of the rule's
	// limits, in the order of Rule.Parts: the rule's own name first.
	Keys []PartKeys
}

// Keys returns how many keys the node's counter tables hold, every rule's
// limits together: what Config.MaxKeys bounds (the keys of the strict
// log's state machine aside). It takes no lock: a program may poll it, to
// give the memory of a flood of keys back to the system once they have
// gone (README, Memory).
func (n *Node) Keys() int { return n.replica.Keys() }

// PartKeys is how many keys a node holds for one limit of a rule.
type PartKeys struct {
	// Name is the limit's name: the rule's for its first, name#2, #3 …
	// for the others (window.Rule.Parts).
	Name string
	// Keys is how many keys its counter table holds: those with counts
	// in the current or the previous window. For a strict rule, it adds
	// those the strict log's state machine holds on this node, where it
	// runs one.
	Keys int
	// Evicted is how many keys its counter table evicted to keep the node
	// within Config.MaxKeys; it carries over a Reload that keeps the rule.
	Evicted uint64
}

// RuleStats returns what the node counted of each of its rules, in the
// order of Rules. It takes each counter table's shard locks in turn, as a
// check does: it is for a scrape, not for every request.
func (n *Node) RuleStats() []RuleStats {
	x := n.index.Load()
	out := make([]RuleStats, 0, len(x.order))
	for _, r := range x.order {
		st := RuleStats{Rule: r}
		if c := x.counts[r.Name]; c != nil {
			st.Decisions = c.read()
		}
		if t := n.replica.Table(r.Name); t != nil {
			// The table's tally holds what its checks on the local path
			// decided; a rule that gained limits or turned strict keeps
			// what it tallied before.
			tl := t.Tally()
			local := &st.Decisions[window.PathLocal]
			local[ResultAllowed] += tl.Admitted
			local[ResultRefused] += tl.Refused
			local[ResultShadowRefused] += tl.ShadowRefused
		}
		for _, p := range r.Parts() {
			if t := n.replica.Table(p.Name); t != nil {
				k := PartKeys{Name: p.Name, Keys: t.Len(), Evicted: t.Evicted()}
				if r.IsStrict() && n.strict != nil {
					k.Keys += n.strict.Keys(p.Name)
				}
				st.Keys = append(st.Keys, k)
			}
		}
		out = append(out, st)
	}
	return out
}

// latencyBorrow is the slot of Node.latency, past the paths', for local
// checks that waited on a key's owner.
const latencyBorrow = numPaths

// Histogram is a distribution of durations as of one moment, in the form
// Prometheus exports: counts of observations at or below each bound.
type Histogram struct {
	// Count is how many durations were observed, and Sum their total.
	Count uint64
	Sum   time.Duration
	// Buckets hold, for increasing upper bounds, how many observations
	// were at or below each: cumulative counts. Those above the last
	// bound count in Count alone.
	Buckets []Bucket
}

// Bucket is one bound of a Histogram and the observations at or below it.
type Bucket struct {
	UpperBound time.Duration
	Count      uint64
}

// histogramOf reads h.
func histogramOf(h *metric.Histogram) Histogram {
	s := h.Snapshot()
	out := Histogram{Count: s.Count, Sum: time.Duration(s.Sum), Buckets: make([]Bucket, metric.Bounds)}
	var cum uint64
	for i := range metric.Bounds {
		cum += s.Counts[i]
		out.Buckets[i] = Bucket{UpperBound: time.Duration(metric.Bound(i)), Count: cum}
	}
	return out
}

// PathLatency is how long a node's checks took on one path.
type PathLatency struct {
	// Path is the path's name: one of window.Path's (local, strict,
	// fail-open, fail-closed, fail-local), or borrow for a local check
	// that waited on its key's owner.
	Path string
	// Sampled says that only some of the path's checks were timed: about
	// one in 64 on the local path. Every other path times every check.
	Sampled bool
	// Latency is their distribution, from the check's start on the node
	// to its decision.
	Latency Histogram
}

// DecisionLatency returns how long the node's checks took, by path. A
// check on the local path is timed about once in 64, chosen by its start
// time, so that timing costs the check nothing it would notice; a check
// that waited on its key's owner counts under borrow, not local, and every
// one is timed, as is every strict check whatever path answered it. A
// check that failed is not timed, but for a strict one whose outcome is
// unknown.
func (n *Node) DecisionLatency() []PathLatency {
	out := make([]PathLatency, 0, len(n.latency))
	for p := range numPaths {
		out = append(out, PathLatency{Path: window.Path(p).String(), Sampled: window.Path(p) == window.PathLocal,
			Latency: histogramOf(&n.latency[p])})
	}
	return append(out, PathLatency{Path: "borrow", Latency: histogramOf(&n.latency[latencyBorrow])})
}

// StrictApplyLatency returns how long the strict log entries this node
// committed as leader took, from Raft's Apply to their application: the
// group commit's round of replication. It is empty on a node that has not
// led.
func (n *Node) StrictApplyLatency() Histogram { return histogramOf(&n.metrics.StrictApply) }

// PeerStats are a node's sync traffic with one live peer.
type PeerStats struct {
	// Name is the peer's node name.
	Name string
	// DeltasSent and BytesSent are the sync messages this node wrote to
	// the peer's stream and their bytes; DeltasReceived and BytesReceived
	// those it merged from the peer. They count from when the peer
	// joined, across its restarts, and start again if it leaves and comes
	// back.
	DeltasSent, BytesSent, DeltasReceived, BytesReceived uint64
	// RoundTrip is the peer's round trip as owner of keys this node asked
	// it about (counter.Replica.RoundTrip); zero while none was measured.
	RoundTrip time.Duration
}

// PeerStats returns the node's sync traffic with each of its live peers,
// by name.
func (n *Node) PeerStats() []PeerStats {
	ps := n.peers
	ps.mu.Lock()
	out := make([]PeerStats, 0, len(ps.peers))
	for inc, p := range ps.peers {
		c := p.stats
		st := PeerStats{Name: inc.Node, DeltasSent: c.deltasSent.Load(), BytesSent: c.bytesSent.Load(),
			DeltasReceived: c.deltasReceived.Load(), BytesReceived: c.bytesReceived.Load()}
		if rtt, ok := n.replica.RoundTrip(inc); ok {
			st.RoundTrip = rtt
		}
		out = append(out, st)
	}
	ps.mu.Unlock()
	slices.SortFunc(out, func(a, b PeerStats) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// MemberStates counts the members of the fleet as a node sees them, by
// state.
type MemberStates struct {
	// Alive are the members gossip lists that answered a ping, this node
	// included; Suspect those gossip lists that did not.
	Alive, Suspect int
	// Failed are members gossip declared gone that the node still tries
	// to reconnect (Config.ReconnectTimeout).
	Failed int
}

// MemberStates returns the fleet's members by state, as `sluice members`
// shows them: it pings each member gossip lists, at most 16 at once, until
// ctx ends; a member whose ping was not sent by then counts as alive. A
// node without gossip is one alive member.
func (n *Node) MemberStates(ctx context.Context) MemberStates {
	m := n.members
	if m == nil {
		return MemberStates{Alive: 1}
	}
	members := m.members()
	suspect := m.unreachable(ctx, members)
	st := MemberStates{Failed: len(m.reconnect.failedMembers())}
	self := false
	for _, c := range members {
		self = self || c.name == n.cfg.Name
		if suspect[c.name] {
			st.Suspect++
		} else {
			st.Alive++
		}
	}
	if !self {
		st.Alive++ // gossip has stopped listing this node: it is closing
	}
	return st
}

// peerCounters are one peer's sync traffic, kept by its name so that they
// go on across the peer's restarts.
type peerCounters struct {
	deltasSent, bytesSent, deltasReceived, bytesReceived atomic.Uint64
}
