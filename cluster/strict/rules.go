package strict

import (
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// syncRules, on the leader, brings the log's strict rules in line with this
// node's configuration, in one entry that every replica applies at the same
// point. A rule turning strict brings the counts of its current windows from
// this node's batched view; a rule leaving strict hands the log's counts to
// every node's batched table. Either way nothing admitted is forgotten.
func (g *strictGroup) syncRules(ctx context.Context) {
	want := *g.rules.Load()
	have := g.fsm.ruleList()
	if sameRules(want, have) {
		return
	}
	haveBy := make(map[string]window.Rule, len(have))
	for _, r := range have {
		haveBy[r.Name] = r
	}
	list := make([]window.Rule, 0, len(want))
	for _, r := range want {
		list = append(list, r)
	}
	slices.SortFunc(list, func(a, b window.Rule) int { return strings.Compare(a.Name, b.Name) })

	now := max(g.e.h.Now(), g.fsm.time())
	// Counts of rules entering the log, from this node's batched tables
	// where the window is the same.
	entering := map[string]bool{}
	for _, r := range list {
		if _, ok := haveBy[r.Name]; ok {
			continue
		}
		if t := g.e.replica.Table(r.Name); t != nil && t.Rule().Window == r.Window && t.Rule().Type == r.Type {
			entering[r.Name] = true
		}
	}
	var seed *sluicev1.Delta
	if len(entering) > 0 {
		seed = wire.EncodeDelta(onlyRules(g.e.replica.Snapshot(now), entering))
	}
	// Counts of rules leaving the log go to the batched tables, here and on
	// every peer, before the log forgets them.
	leaving := map[string]bool{}
	for _, r := range have {
		if _, ok := want[r.Name]; !ok {
			leaving[r.Name] = true
		}
	}
	if len(leaving) > 0 {
		handoff := g.fsm.snapshotRules(leaving)
		handoff.From = g.e.self
		// The log's counts, this node's own to take: peers that have not
		// heard of the log's incarnation pull them from this node.
		if _, err := g.e.replica.ReceiveFrom(g.e.h.Now(), handoff, counter.Origin{Asked: true}); err != nil {
			g.e.log.Warn("handing strict counts to batched tables", "err", err)
		}
		g.e.h.Broadcast(ctx, handoff)
	}

	data, err := proto.Marshal(&sluicev1.StrictBatch{Now: now, Rules: wire.EncodeRules(list), Seed: seed})
	if err != nil {
		g.e.log.Error("encoding a strict rule change", "err", err)
		return
	}
	if err := g.awaitApply(g.raft.Apply(data, 5*time.Second)); err != nil {
		g.e.log.Warn("appending a strict rule change", "err", err)
		return
	}
	names := make([]string, len(list))
	for i, r := range list {
		names[i] = r.Name
	}
	g.e.log.Info("strict rules in the log", "rules", names, "seeded", len(entering), "handed_back", len(leaving))
}

func sameRules(want map[string]window.Rule, have []window.Rule) bool {
	if len(want) != len(have) {
		return false
	}
	for _, r := range have {
		if w, ok := want[r.Name]; !ok || !w.Equal(r) {
			return false
		}
	}
	return true
}

// onlyRules keeps the parts of d for the named rules.
func onlyRules(d *counter.Delta, names map[string]bool) *counter.Delta {
	kept := d.Rules[:0]
	for _, rd := range d.Rules {
		if names[rd.Rule] {
			kept = append(kept, rd)
		}
	}
	d.Rules = kept
	return d
}

// setRules gives the group this node's new strict rules.
func (g *strictGroup) setRules(rules []window.Rule) {
	_, byName := strictRules(rules)
	g.rules.Store(&byName)
}

// importOutside, on the leader, appends to the log the counts this node
// holds for the log's rules that were admitted outside it: by peers that
// still treat a rule as batched during a rolling reload, and by fail-local
// answers during a partition. The log's own admissions are kept under the
// log's incarnation and merging is a per-incarnation maximum, so importing
// again counts nothing twice.
func (g *strictGroup) importOutside(ctx context.Context) {
	if !g.outside.Swap(false) {
		return
	}
	names := map[string]bool{}
	for _, r := range g.fsm.ruleList() {
		names[r.Name] = true
	}
	now := max(g.e.h.Now(), g.fsm.time())
	d := onlyRules(g.e.replica.Snapshot(now), names)
	if len(d.Rules) == 0 {
		return
	}
	data, err := proto.Marshal(&sluicev1.StrictBatch{Now: now, Seed: wire.EncodeDelta(d)})
	if err == nil {
		err = g.awaitApply(g.raft.Apply(data, time.Second))
	}
	if err != nil {
		g.outside.Store(true)
		g.e.log.Debug("importing counts from outside the log", "err", err)
	}
}
