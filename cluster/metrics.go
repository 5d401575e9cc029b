package cluster

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/counter"
)

// Metrics are a node's counters and gauges as of one moment, read with
// Node.Metrics; the agent exports them at /metrics in the Prometheus text
// format. They are values: changing one changes nothing in the node.
type Metrics struct {
	// Members and Peers are the cluster size as seen by this node, itself
	// included, and the peers it streams to.
	Members, Peers int64
	// DriftedMembers are members whose rule set differs from this node's.
	DriftedMembers int64
	// SkewedPeers are peers whose clocks are off from the fleet's by more
	// than the tolerance; ClockCorrection is what this node adds to its own
	// clock to decide on the fleet's (nanoseconds, 0 when it agrees).
	SkewedPeers, ClockCorrection int64
	// Saves are the times a node with a data dir saved its changed counts;
	// LastSaveAt is the node-clock time (Unix nanoseconds) of the counts in
	// the last completed save: a crash loses what was admitted after it.
	Saves, LastSaveAt int64
	// SyncedThrough is the node-clock time (Unix nanoseconds) up to which
	// this node's counts have been written to every live peer, as of its
	// last sync round; 0 without peers. A crash loses, until the window
	// ends, what was admitted after it and not saved.
	SyncedThrough int64
	// Reconnects are joins to a failed member or a missing seed that
	// reached it: heals of a split fleet or a restarted seed.
	Reconnects int64
	// LatePulls are pulls of the fleet's state made after start, by a node
	// that started alone or cut off from its peers and so could not pull
	// before serving.
	LatePulls int64
	// Sync traffic out: messages, entries and bytes written to peers;
	// deltas dropped for a slow peer; streams that broke.
	DeltasSent, EntriesSent, BytesSent, DeltasDropped, StreamResets int64
	// Sync traffic in: deltas merged, entries merged, deltas rejected as
	// malformed, deltas naming rules this node does not have.
	DeltasReceived, EntriesMerged, DeltasRejected, UnknownRuleDeltas int64
	// Sync deltas rejected for what they say rather than how: whole, from
	// a sender that is not a member of the fleet as this node's gossip sees
	// it (DeltasNotMember); or in part, for entries (not merged; a delta
	// counts once per reason) that name an incarnation this node has not
	// heard of, are for a window more than one ahead of this node's, or
	// say more than their incarnation could have admitted. With
	// DeltasRejected, these are sluice_sync_deltas_rejected_total by
	// reason.
	DeltasNotMember, DeltasUnknownInc, DeltasFutureWindow, DeltasOverCount int64
	// Strict mode: log entries this node committed as leader, the checks
	// they held, and checks answered by fail_mode for want of a leader.
	StrictEntries, StrictChecks, StrictFailovers int64
	// StrictInFlightFailovers are the fail-mode answers given while the
	// check was on its way to a leader that did not answer in time.
	StrictInFlightFailovers int64
	// StrictRecoveries are the times this node rebuilt the strict group
	// from the voters it had left, after a majority of them restarted
	// without their logs.
	StrictRecoveries int64
	// StrictLeaderChanges are the strict leaders this node saw elected,
	// and StrictForwarded the strict checks it sent to a leader.
	StrictLeaderChanges, StrictForwarded int64
	// Borrows are checks this node asked a key's owner about (owner
	// allocation), and BorrowTimeouts those whose answer did not come in
	// time and were decided from this node's view.
	Borrows, BorrowTimeouts int64
	// ShadowRefusals are refusals by rules in shadow mode, whose callers
	// were admitted: the sum over the rules of their checks whose result
	// is ResultShadowRefused (RuleStats), a check of a rule with several
	// limits once.
	ShadowRefusals int64
	// Reloads and ReloadErrors are the calls of Reload that changed the
	// rules and that failed; ReloadErrors also counts ReloadFailed.
	Reloads, ReloadErrors int64
	// UnknownRuleChecks are checks that named no rule of the node. They
	// count apart from the rules' metrics, so that a name sent from
	// outside never becomes a metric's label.
	UnknownRuleChecks int64
	// TLSRefusalsGRPC and TLSRefusalsRaft are connections refused for
	// their certificate, on the gRPC port and the Raft transport: TLS
	// handshakes that failed (no certificate where one is needed, one of
	// no trusted CA, a caller that does not speak TLS) either way, this
	// node's dials to peers included, and calls of the peer services
	// without a peer's certificate.
	TLSRefusalsGRPC, TLSRefusalsRaft int64
	// TLSReloads and TLSReloadErrors are readings of changed TLS files
	// that the node took, and those it refused (the material before
	// stayed in use).
	TLSReloads, TLSReloadErrors int64
	// GossipKeys are the gossip encryption keys the node holds
	// (Config.SecretKeys; 0 when its gossip is not encrypted).
	GossipKeys int64
	// GossipKeyReloads and GossipKeyReloadErrors are calls of
	// SetSecretKeys that changed the keys, and those refused (the keys
	// before stayed in use).
	GossipKeyReloads, GossipKeyReloadErrors int64
	// GossipRefusals are gossip messages and connections refused for
	// their encryption, this node's joins included: plaintext where
	// encryption is required, encrypted with no key this node holds, or
	// encrypted to a node without keys.
	GossipRefusals int64
	// RefusedBatchSize, RefusedKeyLength, RefusedRuleLength,
	// RefusedMessageSize and RefusedDeltaSize count what the node refused
	// from outside for a bound on its size (README, Limits on input): a
	// CheckBatch of more than MaxBatchChecks checks; a check of a key
	// longer than counter.MaxKeyLen, or of a rule name longer than
	// counter.MaxRuleLen, over gRPC; a gRPC message larger than
	// MaxMessageSize, to any service the node serves; a peer's delta of
	// more entries, rules or incarnations than wire.MaxDeltaEntries.
	RefusedBatchSize, RefusedKeyLength, RefusedRuleLength, RefusedMessageSize, RefusedDeltaSize int64
}

// counters are the node's live metrics, updated as it works: each is the
// field of Metrics of the same name, which Node.Metrics reads them into
// (ShadowRefusals, which the rules' counts hold, aside).
type counters struct {
	Members, Peers                                                   atomic.Int64
	DriftedMembers                                                   atomic.Int64
	SkewedPeers, ClockCorrection                                     atomic.Int64
	Saves, LastSaveAt                                                atomic.Int64
	SyncedThrough                                                    atomic.Int64
	Reconnects, LatePulls                                            atomic.Int64
	DeltasSent, EntriesSent, BytesSent, DeltasDropped, StreamResets  atomic.Int64
	DeltasReceived, EntriesMerged, DeltasRejected, UnknownRuleDeltas atomic.Int64
	strictapi.Counters                                               // strict mode's, which it updates itself
	Borrows, BorrowTimeouts                                          atomic.Int64
	Reloads, ReloadErrors                                            atomic.Int64
	UnknownRuleChecks                                                atomic.Int64
	TLSRefusalsGRPC, TLSRefusalsRaft                                 atomic.Int64
	TLSReloads, TLSReloadErrors                                      atomic.Int64
	GossipKeys                                                       atomic.Int64
	GossipKeyReloads, GossipKeyReloadErrors                          atomic.Int64
	GossipRefusals                                                   atomic.Int64
	RefusedBatchSize, RefusedKeyLength, RefusedRuleLength            atomic.Int64
	RefusedMessageSize, RefusedDeltaSize                             atomic.Int64

	DeltasNotMember, DeltasUnknownInc, DeltasFutureWindow, DeltasOverCount atomic.Int64
}

// rejected is the counter of deltas with entries rejected for why.
func (c *counters) rejected(why counter.Reason) *atomic.Int64 {
	switch why {
	case counter.UnknownIncarnation:
		return &c.DeltasUnknownInc
	case counter.FutureWindow:
		return &c.DeltasFutureWindow
	}
	return &c.DeltasOverCount
}

func newCounters() *counters { return &counters{} }

// snapshot reads every counter.
func (c *counters) snapshot() Metrics {
	return Metrics{
		Members:                 c.Members.Load(),
		Peers:                   c.Peers.Load(),
		DriftedMembers:          c.DriftedMembers.Load(),
		SkewedPeers:             c.SkewedPeers.Load(),
		ClockCorrection:         c.ClockCorrection.Load(),
		Saves:                   c.Saves.Load(),
		LastSaveAt:              c.LastSaveAt.Load(),
		SyncedThrough:           c.SyncedThrough.Load(),
		Reconnects:              c.Reconnects.Load(),
		LatePulls:               c.LatePulls.Load(),
		DeltasSent:              c.DeltasSent.Load(),
		EntriesSent:             c.EntriesSent.Load(),
		BytesSent:               c.BytesSent.Load(),
		DeltasDropped:           c.DeltasDropped.Load(),
		StreamResets:            c.StreamResets.Load(),
		DeltasReceived:          c.DeltasReceived.Load(),
		EntriesMerged:           c.EntriesMerged.Load(),
		DeltasRejected:          c.DeltasRejected.Load(),
		UnknownRuleDeltas:       c.UnknownRuleDeltas.Load(),
		StrictEntries:           c.StrictEntries.Load(),
		StrictChecks:            c.StrictChecks.Load(),
		StrictFailovers:         c.StrictFailovers.Load(),
		StrictInFlightFailovers: c.StrictInFlightFailovers.Load(),
		StrictRecoveries:        c.StrictRecoveries.Load(),
		StrictLeaderChanges:     c.StrictLeaderChanges.Load(),
		StrictForwarded:         c.StrictForwarded.Load(),
		Borrows:                 c.Borrows.Load(),
		BorrowTimeouts:          c.BorrowTimeouts.Load(),
		Reloads:                 c.Reloads.Load(),
		ReloadErrors:            c.ReloadErrors.Load(),
		UnknownRuleChecks:       c.UnknownRuleChecks.Load(),
		TLSRefusalsGRPC:         c.TLSRefusalsGRPC.Load(),
		TLSRefusalsRaft:         c.TLSRefusalsRaft.Load(),
		TLSReloads:              c.TLSReloads.Load(),
		TLSReloadErrors:         c.TLSReloadErrors.Load(),
		GossipKeys:              c.GossipKeys.Load(),
		GossipKeyReloads:        c.GossipKeyReloads.Load(),
		GossipKeyReloadErrors:   c.GossipKeyReloadErrors.Load(),
		GossipRefusals:          c.GossipRefusals.Load(),
		RefusedBatchSize:        c.RefusedBatchSize.Load(),
		RefusedKeyLength:        c.RefusedKeyLength.Load(),
		RefusedRuleLength:       c.RefusedRuleLength.Load(),
		RefusedMessageSize:      c.RefusedMessageSize.Load(),
		RefusedDeltaSize:        c.RefusedDeltaSize.Load(),
		DeltasNotMember:         c.DeltasNotMember.Load(),
		DeltasUnknownInc:        c.DeltasUnknownInc.Load(),
		DeltasFutureWindow:      c.DeltasFutureWindow.Load(),
		DeltasOverCount:         c.DeltasOverCount.Load(),
	}
}

// rejectedHelp describes sluice_sync_deltas_rejected_total.
const rejectedHelp = "Sync deltas rejected, by reason: whole (malformed; not_member, from a node that is not a member of the fleet) " +
	"or in part, for entries naming an incarnation this node has not heard of (unknown_incarnation), for a window more than one ahead " +
	"(future_window), or saying more than their incarnation could have admitted (over_count)."

// Series is one node-wide metric's value, named and described as the
// Prometheus text format has it.
type Series struct {
	// Name and Help are the metric's name and description.
	Name, Help string
	// Counter says the metric is a counter; else it is a gauge.
	Counter bool
	// Label and LabelValue are the series' one label, or empty: a metric
	// with a label has a Series per value, one after another.
	Label, LabelValue string
	// Value is the series' value.
	Value int64
}

// refusedHelp describes sluice_requests_refused_total.
const refusedHelp = "Requests and peers' deltas refused for a bound on their size, by reason: batch_size (a CheckBatch of more than " +
	"1000 checks), key_length (over 1024 bytes), rule_length (over 130 bytes), message_size (a gRPC message over 16 MiB), " +
	"delta_size (a peer's delta of more than 65536 entries, rules or incarnations)."

// Series lists the metrics as Prometheus series, in a fixed order: what
// WritePrometheus writes, and what the collector of package cluster/prom
// exports under the same names (but for sluice_members, which it splits
// by state).
func (m Metrics) Series() []Series {
	return []Series{
		{Name: "sluice_members", Counter: false, Help: "Cluster members seen by this node, itself included.", Value: m.Members},
		{Name: "sluice_peers", Counter: false, Help: "Peers this node streams deltas to.", Value: m.Peers},
		{Name: "sluice_rules_drift_members", Counter: false, Help: "Members whose rule set differs from this node's.", Value: m.DriftedMembers},
		{Name: "sluice_clock_skewed_peers", Counter: false, Help: "Peers whose clocks are off from the fleet's by more than the tolerance.", Value: m.SkewedPeers},
		{Name: "sluice_clock_correction_nanoseconds", Counter: false, Help: "What this node adds to its own clock to decide on the fleet's.", Value: m.ClockCorrection},
		{Name: "sluice_saves_total", Counter: true, Help: "Times the node saved its changed counts to its data dir.", Value: m.Saves},
		{Name: "sluice_last_save_timestamp_nanoseconds", Counter: false, Help: "Node-clock time of the counts in the last completed save; a crash loses what was admitted after it.", Value: m.LastSaveAt},
		{Name: "sluice_sync_written_through_timestamp_nanoseconds", Counter: false, Help: "Node-clock time up to which this node's counts have been written to every live peer (0 without peers); now minus this is the sync lag.", Value: m.SyncedThrough},
		{Name: "sluice_reconnects_total", Counter: true, Help: "Joins to a failed member or a missing seed that reached it.", Value: m.Reconnects},
		{Name: "sluice_late_pulls_total", Counter: true, Help: "Pulls of the fleet's state after start, by a node that started alone or cut off.", Value: m.LatePulls},
		{Name: "sluice_sync_deltas_sent_total", Counter: true, Help: "Delta messages written to peers.", Value: m.DeltasSent},
		{Name: "sluice_sync_entries_sent_total", Counter: true, Help: "Entries written to peers.", Value: m.EntriesSent},
		{Name: "sluice_sync_bytes_sent_total", Counter: true, Help: "Bytes of delta messages written to peers.", Value: m.BytesSent},
		{Name: "sluice_sync_deltas_dropped_total", Counter: true, Help: "Deltas dropped for a slow peer (followed by a full resend).", Value: m.DeltasDropped},
		{Name: "sluice_sync_stream_resets_total", Counter: true, Help: "Sync streams that broke and were reopened.", Value: m.StreamResets},
		{Name: "sluice_sync_deltas_received_total", Counter: true, Help: "Delta messages merged from peers.", Value: m.DeltasReceived},
		{Name: "sluice_sync_entries_merged_total", Counter: true, Help: "Entries merged from peers.", Value: m.EntriesMerged},
		{Name: "sluice_sync_deltas_rejected_total", Counter: true, Help: rejectedHelp, Value: m.DeltasRejected, Label: "reason", LabelValue: "malformed"},
		{Name: "sluice_sync_deltas_rejected_total", Counter: true, Help: rejectedHelp, Value: m.DeltasNotMember, Label: "reason", LabelValue: "not_member"},
		{Name: "sluice_sync_deltas_rejected_total", Counter: true, Help: rejectedHelp, Value: m.DeltasUnknownInc, Label: "reason", LabelValue: counter.UnknownIncarnation.String()},
		{Name: "sluice_sync_deltas_rejected_total", Counter: true, Help: rejectedHelp, Value: m.DeltasFutureWindow, Label: "reason", LabelValue: counter.FutureWindow.String()},
		{Name: "sluice_sync_deltas_rejected_total", Counter: true, Help: rejectedHelp, Value: m.DeltasOverCount, Label: "reason", LabelValue: counter.OverCount.String()},
		{Name: "sluice_sync_unknown_rule_deltas_total", Counter: true, Help: "Deltas naming rules this node does not have.", Value: m.UnknownRuleDeltas},
		{Name: "sluice_strict_entries_total", Counter: true, Help: "Raft log entries committed while leading.", Value: m.StrictEntries},
		{Name: "sluice_strict_checks_total", Counter: true, Help: "Strict checks decided in those entries.", Value: m.StrictChecks},
		{Name: "sluice_strict_failovers_total", Counter: true, Help: "Strict checks answered by fail_mode for want of a leader.", Value: m.StrictFailovers},
		{Name: "sluice_strict_inflight_failovers_total", Counter: true, Help: "Strict checks answered by fail_mode while on their way to a leader that did not answer in time.", Value: m.StrictInFlightFailovers},
		{Name: "sluice_borrows_total", Counter: true, Help: "Checks this node asked a key's owner about, its grant spent while the fleet had room.", Value: m.Borrows},
		{Name: "sluice_borrow_timeouts_total", Counter: true, Help: "Checks whose owner did not answer in time, decided from this node's view.", Value: m.BorrowTimeouts},
		{Name: "sluice_shadow_refusals_total", Counter: true, Help: "Refusals by rules in shadow mode, whose callers were admitted.", Value: m.ShadowRefusals},
		{Name: "sluice_strict_recoveries_total", Counter: true, Help: "Strict groups this node rebuilt from the voters left after a majority restarted without their logs.", Value: m.StrictRecoveries},
		{Name: "sluice_strict_leader_changes_total", Counter: true, Help: "Strict leaders this node saw elected: one other than the last it knew, or one after a spell without.", Value: m.StrictLeaderChanges},
		{Name: "sluice_strict_forwarded_checks_total", Counter: true, Help: "Strict checks this node sent to the leader to decide.", Value: m.StrictForwarded},
		{Name: "sluice_config_reloads_total", Counter: true, Help: "Reloads of the rules, by result.", Value: m.Reloads, Label: "result", LabelValue: "ok"},
		{Name: "sluice_config_reloads_total", Counter: true, Help: "Reloads of the rules, by result.", Value: m.ReloadErrors, Label: "result", LabelValue: "error"},
		{Name: "sluice_unknown_rule_checks_total", Counter: true, Help: "Checks that named no rule of this node.", Value: m.UnknownRuleChecks},
		{Name: "sluice_tls_refusals_total", Counter: true, Help: "Connections and peer calls refused for their certificate, by transport.", Value: m.TLSRefusalsGRPC, Label: "transport", LabelValue: "grpc"},
		{Name: "sluice_tls_refusals_total", Counter: true, Help: "Connections and peer calls refused for their certificate, by transport.", Value: m.TLSRefusalsRaft, Label: "transport", LabelValue: "raft"},
		{Name: "sluice_tls_reloads_total", Counter: true, Help: "Readings of changed TLS files, by result: taken, or refused (the material before stays in use).", Value: m.TLSReloads, Label: "result", LabelValue: "ok"},
		{Name: "sluice_tls_reloads_total", Counter: true, Help: "Readings of changed TLS files, by result: taken, or refused (the material before stays in use).", Value: m.TLSReloadErrors, Label: "result", LabelValue: "error"},
		{Name: "sluice_gossip_keys", Counter: false, Help: "Gossip encryption keys the node holds; 0 when its gossip is not encrypted.", Value: m.GossipKeys},
		{Name: "sluice_gossip_key_reloads_total", Counter: true, Help: "Changes of the gossip keys, by result: taken, or refused (the keys before stay in use).", Value: m.GossipKeyReloads, Label: "result", LabelValue: "ok"},
		{Name: "sluice_gossip_key_reloads_total", Counter: true, Help: "Changes of the gossip keys, by result: taken, or refused (the keys before stay in use).", Value: m.GossipKeyReloadErrors, Label: "result", LabelValue: "error"},
		{Name: "sluice_gossip_refusals_total", Counter: true, Help: "Gossip messages and connections refused for their encryption: plaintext where it is required, or no key in common.", Value: m.GossipRefusals},
		{Name: "sluice_requests_refused_total", Counter: true, Help: refusedHelp, Value: m.RefusedBatchSize, Label: "reason", LabelValue: "batch_size"},
		{Name: "sluice_requests_refused_total", Counter: true, Help: refusedHelp, Value: m.RefusedKeyLength, Label: "reason", LabelValue: "key_length"},
		{Name: "sluice_requests_refused_total", Counter: true, Help: refusedHelp, Value: m.RefusedRuleLength, Label: "reason", LabelValue: "rule_length"},
		{Name: "sluice_requests_refused_total", Counter: true, Help: refusedHelp, Value: m.RefusedMessageSize, Label: "reason", LabelValue: "message_size"},
		{Name: "sluice_requests_refused_total", Counter: true, Help: refusedHelp, Value: m.RefusedDeltaSize, Label: "reason", LabelValue: "delta_size"},
	}
}

// WritePrometheus writes the metrics in the Prometheus text format: the
// node-wide ones, which Node.HTTPHandler serves. A program that wants a
// node's per-rule and per-peer metrics too registers the collector of
// package cluster/prom.
func (m Metrics) WritePrometheus(w io.Writer) error {
	last := ""
	for _, x := range m.Series() {
		if x.Name != last {
			kind := "gauge"
			if x.Counter {
				kind = "counter"
			}
			if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", x.Name, x.Help, x.Name, kind); err != nil {
				return err
			}
			last = x.Name
		}
		labels := ""
		if x.Label != "" {
			labels = fmt.Sprintf("{%s=%q}", x.Label, x.LabelValue)
		}
		if _, err := fmt.Fprintf(w, "%s%s %d\n", x.Name, labels, x.Value); err != nil {
			return err
		}
	}
	return nil
}
