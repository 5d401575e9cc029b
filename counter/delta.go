package counter

// Incarnation names one run of one node. A restarted node gets a new Boot, so
// the counts its earlier run admitted stay counted as someone else's until
// their windows expire.
type Incarnation struct {
	// Node is the node's name, stable across restarts.
	Node string
	// Boot is a fresh random id for each start.
	Boot uint64
}

// Delta is one sync message: counts for any number of rules, keys and
// windows. A regular delta carries only its sender's entries; a full-state
// snapshot carries every incarnation the sender knows of.
type Delta struct {
	// From is the sending incarnation.
	From Incarnation
	// Seq increases with every delta From sends; it orders claims, which,
	// unlike counts, may go down.
	Seq uint64
	// Incarnations are the owners that Entry.Inc indexes; a regular delta
	// lists only From.
	Incarnations []Incarnation
	// Live is how many nodes the sender counts as live, itself included.
	Live int
	// Full marks a snapshot of everything the sender holds, as opposed to a
	// delta of its own changes; a snapshot carries no allocation news.
	Full bool
	// Ack is the highest Seq the sender had received from the destination
	// when it built this delta: the receiver tells from it whether the
	// sender's claims were made seeing its own latest ones.
	Ack uint64
	// Kind says what the delta is for: counts for every peer, or a report
	// to keys' owners, or an owner's answer.
	Kind Kind
	// Rules hold the entries, grouped by rule.
	Rules []RuleDelta
}

// Kind says what a delta is for.
type Kind uint8

const (
	// KindSync carries counts for every peer (classic and adaptive rules,
	// strict rules' counts made outside the log, snapshots).
	KindSync Kind = iota
	// KindReport carries a node's counts of keys to their owner (owner
	// allocation), with what it asks for; entries of other incarnations in
	// it are counts the sender holds for them and passes on.
	KindReport
	// KindAnswer is an owner's answer to a report: the fleet's counts and
	// the grant of each key reported. An owner also sends one, unasked, to
	// a node that has not heard the counts of a key that has gone quiet.
	KindAnswer
	// KindStandby carries, from a key's owner to its standby, the counts
	// only the owner knows: its own, and those of incarnations no longer
	// live. The standby owns the key if the owner leaves, and starts from
	// them.
	KindStandby
	// KindView carries what the sender believes the whole fleet admitted
	// of each key of its owner-allocated rules (Admitted and Prev), not
	// attributed to anyone: a node that pulls state, or starts again from
	// what it saved, takes it as a floor under what the others admitted.
	KindView
)

// RuleDelta is the part of a Delta for one rule.
type RuleDelta struct {
	// Rule is the rule's name.
	Rule string
	// Entries are the counts, one per (key, window, incarnation).
	Entries []Entry
}

// Entry is one incarnation's counts for one key in one window. Admitted and
// Demand only grow for a given (key, window, incarnation), which is what
// makes merging by maximum correct.
type Entry struct {
	// Key is the rate-limited key.
	Key string
	// Window is the window index.
	Window int64
	// Inc indexes Delta.Incarnations.
	Inc uint32
	// Admitted is how many hits the incarnation admitted in the window.
	Admitted int64
	// Demand is how many hits the incarnation was asked for in the window,
	// admitted or not.
	Demand int64
	// Claim is budget the sender has reserved and not yet spent, and Need
	// its demand in its last sync interval (adaptive allocation). Both ride
	// on the sender's own entry for its current window.
	Claim int64
	Need  int64
	// Opening is what the sender may spend in a fixed window before its
	// first sync there, when Opens says it has one (adaptive allocation):
	// its peers hold that much of a fresh window back for it.
	Opening int64
	Opens   bool

	// What owner allocation adds. In a report, Prev is the sender's count in
	// Window−1, Grant, Rate and RateFrom the grant it holds for Window, Ask
	// the hits it waits for (a borrow), Told the sequence of the last
	// report whose answer it applied, and Need its demand in its last sync
	// interval. In an answer, Admitted and Prev are what everyone but the
	// receiver admitted in Window and Window−1; the receiver's count in
	// Window may grow to Grant, and by Rate more per window length from
	// moment RateFrom on (Unix nanoseconds) until moment RateUntil (0:
	// the window's end); Next is its grant for Window+1, and Told the
	// report answered (0: none, the counts of a key that went quiet, sent
	// unasked). Pooled, in a report, says the sender asks its owner
	// faster than its own checks arrive, so that a grant that grows with
	// time may stop before the window's end (see poolStart).
	Prev      int64
	Grant     int64
	Rate      int64
	RateFrom  int64
	RateUntil int64
	Next      int64
	Ask       int64
	Told      uint64
	Pooled    bool
}

// Size returns the number of entries in d.
func (d *Delta) Size() int {
	n := 0
	for i := range d.Rules {
		n += len(d.Rules[i].Entries)
	}
	return n
}
