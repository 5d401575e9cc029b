package strict

import (
	"bytes"
	"io"
	"math"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// strictBatchSeeds are encoded strict log entries for the fuzz corpus.
func strictBatchSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	rules := linearRules()
	seedFrom := counter.Incarnation{Node: "batched", Boot: 5}
	seed := wire.EncodeDelta(&counter.Delta{From: seedFrom, Incarnations: []counter.Incarnation{seedFrom}, Full: true,
		Rules: []counter.RuleDelta{{Rule: rules[0].Name, Entries: []counter.Entry{
			{Key: "k0", Window: 1e9 / int64(rules[0].Window), Admitted: 7, Demand: 9},
		}}}})
	var out [][]byte
	for _, b := range []*sluicev1.StrictBatch{
		{},
		{Now: 1e9, Rules: wire.EncodeRules(rules), Seed: seed, Checks: []*sluicev1.StrictCheck{
			{Id: 1, Rule: rules[0].Name, Key: "k0", Hits: 1},
			{Id: 2, Rule: rules[1].Name, Key: "k1", Hits: 40},
			{Id: 3, Rule: rules[1].Name, Key: "k1", Hits: 1},
		}},
		{Now: 2e9, Checks: []*sluicev1.StrictCheck{
			{Id: 4, Rule: rules[0].Name, Key: "k0", Hits: 0},
			{Id: 5, Rule: rules[0].Name, Key: "", Hits: 1},
			{Id: 6, Rule: rules[0].Name, Key: "k", Hits: -1},
			{Id: 7, Rule: rules[0].Name, Key: "k", Hits: math.MaxInt64},
			{Id: 8, Rule: "unknown", Key: "k", Hits: 1},
		}},
		// Runs decided all or nothing: one failing on a rule the log does
		// not know, one refused by its second check, and a last check
		// joined to nothing after it.
		{Now: 3e9, Checks: []*sluicev1.StrictCheck{
			{Id: 10, Rule: rules[0].Name, Key: "r", Hits: 1, WithNext: true},
			{Id: 11, Rule: "unknown", Key: "r", Hits: 1},
			{Id: 12, Rule: rules[0].Name, Key: "r", Hits: 1, WithNext: true},
			{Id: 13, Rule: rules[1].Name, Key: "k1", Hits: 50, WithNext: true},
			{Id: 14, Rule: rules[1].Name, Key: "r", Hits: 1, WithNext: true},
		}},
		{Now: math.MaxInt64, Rules: wire.EncodeRules(rules[:1]), Checks: []*sluicev1.StrictCheck{{Id: 9, Rule: rules[0].Name, Key: "k", Hits: 1}}},
		{Now: math.MinInt64, Rules: &sluicev1.RuleSet{}, Seed: &sluicev1.Delta{}},
		{Now: 5e9, Rules: &sluicev1.RuleSet{Rules: []*sluicev1.RuleSpec{
			{Name: "b", Count: 3, WindowNs: 1e6, SyncIntervalNs: -1},
			{Name: "b", Count: 3, WindowNs: 1e6, SyncIntervalNs: -1}}}},
	} {
		enc, err := proto.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, enc)
	}
	return out
}

// snapshotBytes returns the encoded snapshot of f.
func snapshotBytes(tb testing.TB, f *strictFSM) []byte {
	tb.Helper()
	s, err := f.Snapshot()
	if err != nil {
		tb.Fatalf("Snapshot: %v", err)
	}
	b, ok := s.(strictSnapshot)
	if !ok {
		tb.Fatalf("Snapshot returned a %T", s)
	}
	return b
}

// FuzzStrictFSMApplyBatch checks that the strict state machine never panics
// on arbitrary raft log entries, returns one result per log (nil for the
// entry that is not a command), one decision per check of each entry it
// can decode, never lets time run back, and leaves a state whose snapshot
// restores.
func FuzzStrictFSMApplyBatch(f *testing.F) {
	seeds := strictBatchSeeds(f)
	for i, s := range seeds {
		f.Add(s, seeds[(i+1)%len(seeds)])
	}
	f.Add([]byte{0xff}, []byte{})
	f.Add([]byte("junk"), seeds[1])

	f.Fuzz(func(t *testing.T, first, second []byte) {
		fsm, err := newStrictFSM(nil)
		if err != nil {
			t.Fatal(err)
		}
		logs := []*raft.Log{
			{Index: 1, Term: 1, Type: raft.LogCommand, Data: first},
			{Index: 2, Term: 1, Type: raft.LogNoop},
			{Index: 3, Term: 1, Type: raft.LogCommand, Data: second},
		}
		out := fsm.ApplyBatch(logs)
		if len(out) != len(logs) {
			t.Fatalf("ApplyBatch returned %d results for %d logs", len(out), len(logs))
		}
		if out[1] != nil {
			t.Fatalf("result for a no-op entry: %#v", out[1])
		}
		var last int64 = math.MinInt64
		for _, i := range []int{0, 2} {
			res, ok := out[i].(*strictResult)
			if !ok || res == nil {
				t.Fatalf("result %d is %#v, want a *strictResult", i, out[i])
			}
			var b sluicev1.StrictBatch
			if perr := proto.Unmarshal(logs[i].Data, &b); perr != nil {
				if res.err == nil {
					t.Fatalf("entry %d does not unmarshal (%v) but got no error", i, perr)
				}
				continue
			}
			if res.err != nil {
				t.Fatalf("entry %d unmarshals but got error %v", i, res.err)
			}
			if len(res.decisions) != len(b.GetChecks()) {
				t.Fatalf("entry %d: %d decisions for %d checks", i, len(res.decisions), len(b.GetChecks()))
			}
			for j, d := range res.decisions {
				if d == nil {
					t.Fatalf("entry %d: decision %d is nil", i, j)
				}
				if d.GetId() != b.GetChecks()[j].GetId() {
					t.Fatalf("entry %d: decision %d has id %d, want %d", i, j, d.GetId(), b.GetChecks()[j].GetId())
				}
				if d.GetDecidedAt() < b.GetNow() || d.GetDecidedAt() < last {
					t.Fatalf("entry %d: decided at %d, before the entry's time %d or an earlier decision at %d",
						i, d.GetDecidedAt(), b.GetNow(), last)
				}
				last = d.GetDecidedAt()
			}
		}
		if now := fsm.time(); now < last {
			t.Fatalf("state machine time %d is before its last decision at %d", now, last)
		}

		snap := snapshotBytes(t, fsm)
		restored, err := newStrictFSM(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := restored.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatalf("the snapshot of an applied state does not restore: %v", err)
		}
		if !reflect.DeepEqual(restored.ruleList(), fsm.ruleList()) || restored.time() != fsm.time() {
			t.Fatalf("restored rules %+v at %d, want %+v at %d", restored.ruleList(), restored.time(), fsm.ruleList(), fsm.time())
		}
	})
}

// FuzzStrictFSMRestore checks that restoring the strict state machine from
// arbitrary snapshot bytes never panics, leaves the state as it was when it
// fails, and when it succeeds gives a state that decides and whose own
// snapshot restores again.
func FuzzStrictFSMRestore(f *testing.F) {
	base, err := newStrictFSM(linearRules())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snapshotBytes(f, base))
	for _, s := range strictBatchSeeds(f) {
		base.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: s}})
		f.Add(snapshotBytes(f, base))
	}
	over := uint64(1)<<62 + 1 // past the largest count a delta may carry
	for _, s := range []*sluicev1.StrictSnapshot{
		{},
		{Now: 1, Counts: &sluicev1.Delta{From: &sluicev1.Incarnation{Node: "strict"}}},
		{Now: 1, Counts: &sluicev1.Delta{From: &sluicev1.Incarnation{Node: "strict"}},
			Rules: &sluicev1.RuleSet{Rules: []*sluicev1.RuleSpec{{Name: "bad"}}}},
		{Now: -1, Counts: &sluicev1.Delta{From: &sluicev1.Incarnation{Node: "s"}, Incarnations: []*sluicev1.Incarnation{{Node: "s"}},
			Rules: []*sluicev1.RuleDelta{{Rule: "lin-fixed", BaseWindow: -5, Entries: []*sluicev1.Entry{
				{Key: "k", Admitted: 3, Demand: 3, Opening: &over}}}}}},
	} {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x12, 0x7f})

	f.Fuzz(func(t *testing.T, data []byte) {
		fsm, err := newStrictFSM(linearRules())
		if err != nil {
			t.Fatal(err)
		}
		check, err := proto.Marshal(&sluicev1.StrictBatch{Now: 3e9, Checks: []*sluicev1.StrictCheck{
			{Id: 1, Rule: "lin-sliding", Key: "k0", Hits: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		fsm.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: check}})
		rulesBefore, timeBefore, snapBefore := fsm.ruleList(), fsm.time(), snapshotBytes(t, fsm)

		if err := fsm.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			if !reflect.DeepEqual(fsm.ruleList(), rulesBefore) || fsm.time() != timeBefore ||
				!bytes.Equal(snapshotBytes(t, fsm), snapBefore) {
				t.Fatalf("a failed Restore (%v) changed the state", err)
			}
			return
		}
		for _, r := range fsm.ruleList() {
			if err := r.Validate(); err != nil {
				t.Fatalf("restored rule %q does not validate: %v", r.Name, err)
			}
			res := fsm.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: mustMarshalBatch(t, &sluicev1.StrictBatch{
				Now: fsm.time(), Checks: []*sluicev1.StrictCheck{{Id: 2, Rule: r.Name, Key: "k0", Hits: 1}}})}).(*strictResult)
			if res.err != nil || len(res.decisions) != 1 || res.decisions[0].GetError() != "" {
				t.Fatalf("restored rule %q does not decide: %v %+v", r.Name, res.err, res.decisions)
			}
		}
		again, err := newStrictFSM(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, fsm)))); err != nil {
			t.Fatalf("the snapshot of a restored state does not restore: %v", err)
		}
	})
}

func mustMarshalBatch(tb testing.TB, b *sluicev1.StrictBatch) []byte {
	tb.Helper()
	out, err := proto.Marshal(b)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
