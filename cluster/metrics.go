package cluster

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
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
	// Borrows are checks this node asked a key's owner about (owner
	// allocation), and BorrowTimeouts those whose answer did not come in
	// time and were decided from this node's view.
	Borrows, BorrowTimeouts int64
	// ShadowRefusals are refusals by rules in shadow mode, whose callers
	// were admitted.
	ShadowRefusals int64
}

// counters are the node's live metrics, updated as it works: each is the
// field of Metrics of the same name, which Node.Metrics reads them into.
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
	ShadowRefusals                                                   atomic.Int64
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
		Borrows:                 c.Borrows.Load(),
		BorrowTimeouts:          c.BorrowTimeouts.Load(),
		ShadowRefusals:          c.ShadowRefusals.Load(),
	}
}

// WritePrometheus writes the metrics in the Prometheus text format.
func (m Metrics) WritePrometheus(w io.Writer) error {
	type metric struct {
		name, kind, help string
		v                *int64
	}
	for _, x := range []metric{
		{"sluice_members", "gauge", "Cluster members seen by this node, itself included.", &m.Members},
		{"sluice_peers", "gauge", "Peers this node streams deltas to.", &m.Peers},
		{"sluice_rules_drift_members", "gauge", "Members whose rule set differs from this node's.", &m.DriftedMembers},
		{"sluice_clock_skewed_peers", "gauge", "Peers whose clocks are off from the fleet's by more than the tolerance.", &m.SkewedPeers},
		{"sluice_clock_correction_nanoseconds", "gauge", "What this node adds to its own clock to decide on the fleet's.", &m.ClockCorrection},
		{"sluice_saves_total", "counter", "Times the node saved its changed counts to its data dir.", &m.Saves},
		{"sluice_last_save_timestamp_nanoseconds", "gauge", "Node-clock time of the counts in the last completed save; a crash loses what was admitted after it.", &m.LastSaveAt},
		{"sluice_sync_written_through_timestamp_nanoseconds", "gauge", "Node-clock time up to which this node's counts have been written to every live peer (0 without peers); now minus this is the sync lag.", &m.SyncedThrough},
		{"sluice_reconnects_total", "counter", "Joins to a failed member or a missing seed that reached it.", &m.Reconnects},
		{"sluice_late_pulls_total", "counter", "Pulls of the fleet's state after start, by a node that started alone or cut off.", &m.LatePulls},
		{"sluice_sync_deltas_sent_total", "counter", "Delta messages written to peers.", &m.DeltasSent},
		{"sluice_sync_entries_sent_total", "counter", "Entries written to peers.", &m.EntriesSent},
		{"sluice_sync_bytes_sent_total", "counter", "Bytes of delta messages written to peers.", &m.BytesSent},
		{"sluice_sync_deltas_dropped_total", "counter", "Deltas dropped for a slow peer (followed by a full resend).", &m.DeltasDropped},
		{"sluice_sync_stream_resets_total", "counter", "Sync streams that broke and were reopened.", &m.StreamResets},
		{"sluice_sync_deltas_received_total", "counter", "Delta messages merged from peers.", &m.DeltasReceived},
		{"sluice_sync_entries_merged_total", "counter", "Entries merged from peers.", &m.EntriesMerged},
		{"sluice_sync_deltas_rejected_total", "counter", "Malformed deltas rejected.", &m.DeltasRejected},
		{"sluice_sync_unknown_rule_deltas_total", "counter", "Deltas naming rules this node does not have.", &m.UnknownRuleDeltas},
		{"sluice_strict_entries_total", "counter", "Raft log entries committed while leading.", &m.StrictEntries},
		{"sluice_strict_checks_total", "counter", "Strict checks decided in those entries.", &m.StrictChecks},
		{"sluice_strict_failovers_total", "counter", "Strict checks answered by fail_mode for want of a leader.", &m.StrictFailovers},
		{"sluice_strict_inflight_failovers_total", "counter", "Strict checks answered by fail_mode while on their way to a leader that did not answer in time.", &m.StrictInFlightFailovers},
		{"sluice_borrows_total", "counter", "Checks this node asked a key's owner about, its grant spent while the fleet had room.", &m.Borrows},
		{"sluice_borrow_timeouts_total", "counter", "Checks whose owner did not answer in time, decided from this node's view.", &m.BorrowTimeouts},
		{"sluice_shadow_refusals_total", "counter", "Refusals by rules in shadow mode, whose callers were admitted.", &m.ShadowRefusals},
		{"sluice_strict_recoveries_total", "counter", "Strict groups this node rebuilt from the voters left after a majority restarted without their logs.", &m.StrictRecoveries},
	} {
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", x.name, x.help, x.name, x.kind, x.name, *x.v); err != nil {
			return err
		}
	}
	return nil
}
