package strict

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// strictFSM is the Raft state machine of strict mode: the exact counter
// table of the strict rules. It never reads a clock: every entry carries the
// leader's time, so every replica makes the same decisions.
type strictFSM struct {
	rules     []window.Rule
	overAdmit int64 // tests only: a broken FSM admits this many hits too many
	// onRules, when set, is called whenever the rules the state machine
	// decides change, with mu held: it must not block.
	onRules func()

	mu      sync.Mutex
	replica *counter.Replica
	now     int64  // time of the last applied entry; time never runs back
	restore uint64 // restores so far, for fresh incarnations
}

// strictIncarnation owns the counts a strict state machine decided itself;
// a restored snapshot's counts belong to an earlier one and still count.
func strictIncarnation(n uint64) counter.Incarnation {
	return counter.Incarnation{Node: "strict", Boot: n}
}

func newStrictFSM(rules []window.Rule) (*strictFSM, error) {
	f := &strictFSM{rules: rules}
	r, err := counter.NewReplica(counter.Config{Self: strictIncarnation(0), Rules: rules})
	if err != nil {
		return nil, err
	}
	f.replica = r
	return f, nil
}

// strictResult is what applying one log entry returns: a decision or an
// error per check, in order.
type strictResult struct {
	decisions []*sluicev1.StrictDecision
	err       error // the entry could not be decoded
}

// Apply decides one entry.
func (f *strictFSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch decides the checks of each committed entry in order.
func (f *strictFSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		var b sluicev1.StrictBatch
		if err := proto.Unmarshal(l.Data, &b); err != nil {
			out[i] = &strictResult{err: fmt.Errorf("strict log entry %d: %w", l.Index, err)}
			continue
		}
		out[i] = &strictResult{decisions: f.decide(&b)}
	}
	return out
}

// decide runs with f.mu held.
func (f *strictFSM) decide(b *sluicev1.StrictBatch) []*sluicev1.StrictDecision {
	// A new leader's clock may be behind the old one's: time never runs
	// back in the log.
	f.now = max(f.now, b.GetNow())
	if f.now >= f.replica.NextTick() {
		f.replica.Tick(f.now) // expires old windows, on the log's time
	}
	f.reconfigure(b)
	checks := b.GetChecks()
	out := make([]*sluicev1.StrictDecision, len(checks))
	for i := 0; i < len(checks); {
		end := i + 1
		for end < len(checks) && checks[end-1].GetWithNext() {
			end++
		}
		if end-i > 1 {
			f.decideRun(checks[i:end], out[i:end])
			i = end
			continue
		}
		c := checks[i]
		d, err := f.replica.Allow(f.now, c.GetRule(), c.GetKey(), c.GetHits())
		if err == nil && !d.Allowed && f.overAdmit > 0 {
			f.overAdmit -= max(c.GetHits(), 1)
			d.Allowed = true
		}
		out[i] = strictDecision(c.GetId(), d, f.now, err)
		i = end
	}
	return out
}

// decideRun decides checks joined by with_next all or nothing, into out:
// each in order until one is refused, whose decision stands; then the
// hits of those admitted before it are given back, and those after it are
// decided for 0 hits, counting nothing, so that each still says what is
// left. A check that fails (a rule the log does not know yet) fails the
// run: every check answers its error and nothing stays counted. A check
// refused under a rule in shadow mode refuses no other, for its caller is
// admitted. Runs with f.mu held.
func (f *strictFSM) decideRun(checks []*sluicev1.StrictCheck, out []*sluicev1.StrictDecision) {
	ds := make([]window.Decision, len(checks))
	tks := make([]counter.Ticket, len(checks))
	giveBack := func() {
		for i := range tks {
			if tks[i].Counted() {
				ds[i].Remaining = min(ds[i].Remaining+f.replica.Refund(&tks[i], f.now), ds[i].Limit)
			}
		}
	}
	refused := false
	for i, c := range checks {
		hits := c.GetHits()
		if refused {
			hits = 0
		}
		d, tk, err := f.replica.Reserve(f.now, c.GetRule(), c.GetKey(), hits)
		if err != nil {
			giveBack()
			for j, c := range checks {
				out[j] = strictDecision(c.GetId(), window.Decision{}, f.now, err)
			}
			return
		}
		ds[i], tks[i] = d, tk
		// A refusal under a rule in shadow mode admits its caller: it
		// refuses no other check of the run.
		refused = refused || (!d.Allowed && !f.replica.Table(c.GetRule()).Rule().Shadow)
	}
	if refused {
		giveBack()
	}
	for i, c := range checks {
		out[i] = strictDecision(c.GetId(), ds[i], f.now, nil)
	}
}

// reconfigure applies an entry's rule change and seed counts. Both are
// checked by the leader before it appends them, and every replica applies
// the same entry alike, so an entry that fails here fails everywhere and is
// skipped everywhere.
func (f *strictFSM) reconfigure(b *sluicev1.StrictBatch) {
	if b.GetRules() != nil {
		if rules, err := wire.DecodeRules(b.GetRules()); err == nil {
			if f.replica.SetRules(rules, f.now) == nil {
				f.rules = rules
				f.rulesChanged()
			}
		}
	}
	if b.GetSeed() != nil {
		if d, err := wire.DecodeDelta(b.GetSeed()); err == nil {
			d.Full = true
			// The log's own record: what it names, it takes.
			_, _ = f.replica.ReceiveFrom(f.now, d, counter.Origin{Asked: true})
		}
	}
}

// hasRules reports whether the state machine decides every rule of rules,
// as they are.
func (f *strictFSM) hasRules(rules map[string]window.Rule) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, r := range rules {
		t := f.replica.Table(name)
		if t == nil || !t.Rule().Equal(r) {
			return false
		}
	}
	return true
}

// ruleList returns the rules the state machine decides.
func (f *strictFSM) ruleList() []window.Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]window.Rule(nil), f.rules...)
}

// time returns the time of the last applied entry.
func (f *strictFSM) time() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// snapshotRules returns the counts the state machine holds for rules.
func (f *strictFSM) snapshotRules(rules map[string]bool) *counter.Delta {
	f.mu.Lock()
	defer f.mu.Unlock()
	return onlyRules(f.replica.Snapshot(f.now), rules)
}

func strictDecision(id uint64, d window.Decision, at int64, err error) *sluicev1.StrictDecision {
	if err != nil {
		return &sluicev1.StrictDecision{Id: id, Code: strictCode(err), Error: err.Error(), DecidedAt: at}
	}
	return &sluicev1.StrictDecision{Id: id, Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
		ResetAfterNs: int64(d.ResetAfter), RetryAfterNs: int64(d.RetryAfter), DecidedAt: at}
}

// counts returns the state machine's view of key under rule at its time.
func (f *strictFSM) counts(rule, key string) window.Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.replica.Table(rule)
	if t == nil {
		return window.Counts{}
	}
	_, view := t.Counts(key, f.now)
	return view
}

// keys returns how many keys the state machine holds for rule.
func (f *strictFSM) keys(rule string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.replica.Table(rule); t != nil {
		return t.Len()
	}
	return 0
}

// Snapshot captures the counts of live windows.
func (f *strictFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	snap := &sluicev1.StrictSnapshot{Now: f.now, Counts: wire.EncodeDelta(f.replica.Snapshot(f.now)), Rules: wire.EncodeRules(f.rules)}
	b, err := proto.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("strict snapshot: %w", err)
	}
	return strictSnapshot(b), nil
}

// Restore replaces the state with a snapshot's.
func (f *strictFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("strict restore: %w", err)
	}
	var snap sluicev1.StrictSnapshot
	if err := proto.Unmarshal(b, &snap); err != nil {
		return fmt.Errorf("strict restore: %w", err)
	}
	d, err := wire.DecodeDelta(snap.GetCounts())
	if err != nil {
		return fmt.Errorf("strict restore: %w", err)
	}
	var rules []window.Rule
	if snap.GetRules() != nil {
		if rules, err = wire.DecodeRules(snap.GetRules()); err != nil {
			return fmt.Errorf("strict restore: %w", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rules == nil {
		rules = f.rules
	}
	f.restore++
	r, err := counter.NewReplica(counter.Config{Self: strictIncarnation(f.restore), Rules: rules, Start: snap.GetNow()})
	if err != nil {
		return err
	}
	if _, err := r.ReceiveFrom(snap.GetNow(), d, counter.Origin{Asked: true}); err != nil {
		return fmt.Errorf("strict restore: %w", err)
	}
	f.replica, f.now, f.rules = r, snap.GetNow(), rules
	f.rulesChanged()
	return nil
}

// rulesChanged runs onRules, if set; f.mu is held.
func (f *strictFSM) rulesChanged() {
	if f.onRules != nil {
		f.onRules()
	}
}

// strictSnapshot is an encoded StrictSnapshot.
type strictSnapshot []byte

// Persist writes the snapshot.
func (s strictSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

// Release frees nothing: the snapshot is a byte slice.
func (strictSnapshot) Release() {}

var _ raft.BatchingFSM = (*strictFSM)(nil)
