//go:build linux

package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The rules every agent runs. Both allow count hits per key per hour, in a
// sliding window; each phase of the test spends fresh keys, so for a key
// "at most count per window" is "at most count in all": a phase lasts far
// less than the 180 s after a window boundary during which ceil(count ×
// (1 − elapsed/window)) of the previous window still holds all of it. The
// invariants then do not depend on when the phases fall.
const (
	batchedRule = "api" // synced every 200 ms, adaptive allocation
	strictRule  = "pay" // sync_interval -1: decided through the Raft log
	count       = 20

	// batchedSlack is how far above count two or three nodes may admit
	// over one key of the batched rule. A node claims budget from a view
	// that lags its peers' by a sync or more, so claims can overlap when
	// deltas are late: with race-built agents on 2 cores at a load average
	// of 10, a fresh key right after the fleet formed took up to 24 of 20.
	// The bound catches a fleet that stops subtracting its peers (each node
	// admitting its own count: 40 or 60), not the lag of a loaded machine.
	// A lone node decides from its own exact counts and gets no slack.
	batchedSlack = count / 4

	// checkTimeout is the deadline `sluice check` gives each call. A
	// strict check that carries a deadline waits for a leader until just
	// before it, then answers by its fail_mode (strict_timeout bounds only
	// checks without one, and the forwarding of checks to the leader).
	checkTimeout = 2 * time.Second
)

// config is the agents' config file; %[1]d is count.
const config = `# Written by TestPartition: one batched and one strict rule.
strict_timeout: 1   # seconds a strict check without a deadline waits for a leader
rules:
  - name: api
    count: %[1]d
    time_window: 3600
    window_type: sliding
    sync_interval: 0.2
    allocation: adaptive
  - name: pay
    count: %[1]d
    time_window: 3600
    window_type: sliding
    sync_interval: -1
    fail_mode: local   # without a leader: enforce count from this node's own view
`

// Generous bounds on the cluster's own timing: how long gossip and Raft
// take to notice a change. They stop a broken run; they are not measured.
const (
	formLimit     = 60 * time.Second // three agents list each other, a leader serves
	noticeLimit   = 60 * time.Second // each side of the cut drops the other
	electionLimit = 30 * time.Second // the majority decides strict rules again
	settleLimit   = 30 * time.Second // batched views take in a sync
	healLimit     = 60 * time.Second // the healed node is listed alive again
)

// partitionHold is how long the cut lasts after the majority has dropped
// the node: a minute, twice the 30 s memberlist keeps gossiping to a dead
// node (GossipToTheDeadTime, LAN config), so that the heal is not found by
// that gossip but by the nodes reaching out again for members they lost.
const partitionHold = 60 * time.Second

// TestPartition runs three agents, a, b and c, each in its own network
// namespace on one bridge, cuts a off, and heals it. a is the lowest name,
// so it bootstraps the strict group and leads it: the cut takes the leader
// away from the majority. The test checks that the strict rule is exact on
// the majority side, once it has a leader again, and is answered by
// fail_mode on a within the caller's deadline; that each side of the
// batched rule admits at most count per key; and that after the heal the
// three list each other again, their views of a batched key agree, and a
// decides through the log again.
func TestPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three agents in network namespaces; skipped with -short")
	}
	skipWithoutNetns(t)
	start := time.Now()
	tp := newTopology(t, "a", "b", "c")
	bin := buildSluice(t)
	built := time.Now()
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, count), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, bin, cfg, tp)
	all := tp.nodes
	cut := tp.node(t, "a")
	rest := []nsNode{tp.node(t, "b"), tp.node(t, "c")}

	// Ask nothing of an agent before it says it serves: a Members call
	// while the node starts races with the start (see README.md).
	took := f.waitFor(t, formLimit, "every agent serves", func() (bool, string) {
		for _, a := range f.agents {
			if !a.logHas("sluice agent serving") {
				return false, a.node.name + " has not logged \"sluice agent serving\""
			}
		}
		return true, ""
	})
	took += f.waitFor(t, formLimit, "a, b and c list each other alive", f.seeEachOther(t, all, all, nil))
	took += f.waitFor(t, formLimit, "every agent decides the strict rule through the log",
		f.strictOn(t, all, "ready"))
	t.Logf("formed: %v after start; %s leads the strict group: %v", took.Round(time.Millisecond),
		cut.name, f.agent(cut).logHas("entering leader state"))

	// Before the partition: the fleet holds both limits.
	atMost(t, "before the partition, batched rule, fleet", f.spend(t, all, batchedRule, "pre", 30), count+batchedSlack)
	exact(t, "before the partition, strict rule, fleet", f.spend(t, all, strictRule, "pre", 25))

	// Cut a off: its port on the bridge goes down.
	tp.partition(t, cut)
	cutAt := time.Now()
	// Both sides declare the other failed: b and c drop a, and a drops b
	// and c. Each moment is noted as the wait sees it.
	var restDropped, cutDropped time.Duration
	majority := f.seeEachOther(t, rest, rest, []nsNode{cut})
	lone := f.seeEachOther(t, []nsNode{cut}, []nsNode{cut}, rest)
	f.waitFor(t, noticeLimit, "b and c drop a, and a drops b and c", func() (bool, string) {
		for _, side := range []struct {
			cond func() (bool, string)
			at   *time.Duration
		}{{majority, &restDropped}, {lone, &cutDropped}} {
			if *side.at == 0 {
				if ok, last := side.cond(); !ok {
					return false, last
				}
				*side.at = time.Since(cutAt)
			}
		}
		return true, ""
	})
	droppedAt := cutAt.Add(restDropped)
	t.Logf("partition: b and c dropped a %v after the cut, a dropped b and c %v after it",
		restDropped.Round(time.Millisecond), cutDropped.Round(time.Millisecond))

	// The majority side elects a leader and decides the strict rule exactly.
	elected := f.waitFor(t, electionLimit, "b and c decide the strict rule through the log",
		f.strictOn(t, rest, "probe-part"))
	t.Logf("partition: b and c decide through the log %v after they and a dropped each other", elected.Round(time.Millisecond))
	exact(t, "during the partition, strict rule, b and c", f.spend(t, rest, strictRule, "part", 25))

	// a has no leader: it answers by its fail_mode, local, within the
	// caller's deadline, and enforces count on its own.
	iso := f.spend(t, []nsNode{cut}, strictRule, "iso", 4)
	for _, d := range iso {
		if d.exit > 1 || d.Path != "fail-local" {
			t.Errorf("during the partition, strict rule on a: want an answer by fail_mode (path fail-local) within the caller's %v deadline, got %v",
				checkTimeout, d)
		} else if !d.Allowed {
			t.Errorf("during the partition, strict rule on a: fail-local refused one of the first %d checks of a key: %v", len(iso), d)
		}
	}
	logDecisions(t, "during the partition, strict rule, a", iso)

	// Each side of the batched rule admits at most count.
	atMost(t, "during the partition, batched rule, b and c", f.spend(t, rest, batchedRule, "part", 30), count+batchedSlack)
	atMost(t, "during the partition, batched rule, a", f.spend(t, []nsNode{cut}, batchedRule, "part", 30), count)

	// A key spent a little on both sides, whose views differ while the
	// partition lasts and must agree once it heals.
	restSpent := admitted(f.spend(t, rest[:1], batchedRule, "conv", 3)) + admitted(f.spend(t, rest[1:], batchedRule, "conv", 3))
	cutSpent := admitted(f.spend(t, []nsNode{cut}, batchedRule, "conv", 4))
	t.Logf("partition: key conv: b and c admitted %d, a admitted %d", restSpent, cutSpent)
	if restSpent == 0 || cutSpent == 0 {
		// view reads a node's view only once it counts something there.
		t.Fatalf("partition: key conv: b and c admitted %d, a %d; each side must admit at least one", restSpent, cutSpent)
	}
	settled := f.waitFor(t, settleLimit, "during the partition, each side's view of conv holds its own side's hits", func() (bool, string) {
		want := map[string]int64{"a": count - int64(cutSpent), "b": count - int64(restSpent), "c": count - int64(restSpent)}
		return f.viewsAre(t, all, "conv", want)
	})
	t.Logf("partition: views of conv settled in %v", settled.Round(time.Millisecond))

	// Hold the cut (see partitionHold).
	f.hold(t, droppedAt.Add(partitionHold))
	t.Logf("partition: healed %v after the cut", time.Since(cutAt).Round(time.Millisecond))

	// Heal: a is listed again and the views agree.
	tp.heal(t, cut)
	healed := f.waitFor(t, healLimit, "after the heal, a, b and c list each other alive", f.seeEachOther(t, all, all, nil))
	t.Logf("heal: a, b and c list each other alive %v after the heal", healed.Round(time.Millisecond))
	total := int64(restSpent + cutSpent)
	converged := f.waitFor(t, settleLimit, "after the heal, every view of conv holds both sides' hits", func() (bool, string) {
		return f.viewsAre(t, all, "conv", map[string]int64{"a": count - total, "b": count - total, "c": count - total})
	})
	t.Logf("heal: views of conv agree (remaining %d) %v after the members did", count-total, converged.Round(time.Millisecond))

	// a decides the strict rule through the log again, and the log kept
	// what the majority admitted while a was away.
	back := f.waitFor(t, electionLimit, "after the heal, a decides the strict rule through the log",
		f.strictOn(t, []nsNode{cut}, "probe-heal"))
	t.Logf("heal: a decides through the log %v after the members agreed", back.Round(time.Millisecond))
	if d := f.check(t, cut, strictRule, "part", 1, checkTimeout); d.exit != 1 || d.Path != "strict" {
		t.Errorf("after the heal, strict rule on a, key part (spent to %d by b and c): want refused through the log, got %v", count, d)
	}
	// The leader brings into the log what a admitted by fail_mode.
	isoSpent := int64(admitted(iso))
	imported := f.waitFor(t, settleLimit, "after the heal, the log counts what a admitted by fail_mode", func() (bool, string) {
		for _, n := range all {
			d := f.check(t, n, strictRule, "iso", 0, checkTimeout)
			if d.exit != 0 || d.Path != "strict" || d.Remaining != count-isoSpent {
				return false, fmt.Sprintf("%v (want remaining=%d path=strict)", d, count-isoSpent)
			}
		}
		return true, ""
	})
	t.Logf("heal: the log counts a's %d fail-local admissions of key iso %v after a decided through it", isoSpent, imported.Round(time.Millisecond))
	t.Logf("run: %v, of which %v building the agent", time.Since(start).Round(time.Millisecond), built.Sub(start).Round(time.Millisecond))
}

// spend sends attempts checks of one hit of key under rule, one at a time,
// cycling through nodes, and returns the decisions in order.
func (f *fleet) spend(t *testing.T, nodes []nsNode, rule, key string, attempts int) []decision {
	t.Helper()
	f.alive(t)
	ds := make([]decision, attempts)
	for i := range ds {
		ds[i] = f.check(t, nodes[i%len(nodes)], rule, key, 1, checkTimeout)
	}
	return ds
}

// admitted counts the allowed decisions.
func admitted(ds []decision) int {
	n := 0
	for _, d := range ds {
		if d.exit == 0 && d.Allowed {
			n++
		}
	}
	return n
}

// byNode says how many of ds each node admitted, in the order the nodes
// first appear.
func byNode(ds []decision) string {
	var order []string
	per := map[string]int{}
	for _, d := range ds {
		if _, ok := per[d.node]; !ok {
			order = append(order, d.node)
		}
		per[d.node] += admitted([]decision{d})
	}
	parts := make([]string, len(order))
	for i, name := range order {
		parts[i] = fmt.Sprintf("%s %d", name, per[name])
	}
	return strings.Join(parts, ", ")
}

// failed returns the checks that did not get a decision.
func failed(ds []decision) []decision {
	var out []decision
	for _, d := range ds {
		if d.exit > 1 {
			out = append(out, d)
		}
	}
	return out
}

// atMost checks that every check of a batched rule got a decision and that
// at most limit were admitted.
func atMost(t *testing.T, what string, ds []decision, limit int) {
	t.Helper()
	for _, d := range failed(ds) {
		t.Errorf("%s: a check got no decision: %v", what, d)
	}
	n := admitted(ds)
	if n > limit {
		t.Errorf("%s: admitted %d of %d (%s), want at most %d", what, n, len(ds), byNode(ds), limit)
	}
	t.Logf("%s: admitted %d of %d (%s; at most %d)", what, n, len(ds), byNode(ds), limit)
}

// exact checks that every check of the strict rule, sent one after the
// other, was decided through the log, and that exactly the first count were
// admitted.
func exact(t *testing.T, what string, ds []decision) {
	t.Helper()
	ok := true
	for i, d := range ds {
		if d.exit > 1 || d.Path != "strict" || d.Allowed != (i < count) {
			t.Errorf("%s: check %d of %d: want %s through the log, got %v", what, i+1, len(ds),
				map[bool]string{true: "admitted", false: "refused"}[i < count], d)
			ok = false
		}
	}
	if ok {
		t.Logf("%s: admitted exactly %d of %d, every one through the log", what, admitted(ds), len(ds))
	}
}

// logDecisions logs every decision of ds.
func logDecisions(t *testing.T, what string, ds []decision) {
	t.Helper()
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = "  " + d.String()
	}
	t.Logf("%s:\n%s", what, strings.Join(lines, "\n"))
}

// seeEachOther is a condition: every node of askers lists the nodes of want
// alive, and the nodes of gone failed (declared dead by gossip) or not at
// all.
func (f *fleet) seeEachOther(t *testing.T, askers, want, gone []nsNode) func() (bool, string) {
	return func() (bool, string) {
		for _, n := range askers {
			m, err := f.members(t.Context(), n)
			if err != nil {
				return false, err.Error()
			}
			for _, w := range want {
				if m[w.name] != "alive" {
					return false, fmt.Sprintf("%s lists %v", n.name, m)
				}
			}
			for _, g := range gone {
				if st, ok := m[g.name]; ok && st != "failed" {
					return false, fmt.Sprintf("%s lists %v", n.name, m)
				}
			}
		}
		return true, ""
	}
}

// strictOn is a condition: every node of nodes decides the strict rule
// through the log (asked with hits 0 of key, which spends nothing).
func (f *fleet) strictOn(t *testing.T, nodes []nsNode, key string) func() (bool, string) {
	return func() (bool, string) {
		for _, n := range nodes {
			if d := f.check(t, n, strictRule, key, 0, checkTimeout); d.exit != 0 || d.Path != "strict" {
				return false, d.String()
			}
		}
		return true, ""
	}
}

// view returns the remaining count of key under the batched rule in n's
// view: all the hits n knows of, its own and its peers'. It asks for all
// count hits: a node that counts at least one hit of key refuses that from
// its view, without spending, and says how many fit. (hits 0 would answer
// with the node's own share of the budget under adaptive allocation, not
// with its view.)
func (f *fleet) view(t *testing.T, n nsNode, key string) (int64, error) {
	d := f.check(t, n, batchedRule, key, count, checkTimeout)
	if d.exit != 1 {
		return 0, fmt.Errorf("reading %s's view of %s: want a refusal, got %v", n.name, key, d)
	}
	return d.Remaining, nil
}

// viewsAre reports whether every node's view of key leaves want[node]
// remaining, and else what the views are.
func (f *fleet) viewsAre(t *testing.T, nodes []nsNode, key string, want map[string]int64) (bool, string) {
	ok := true
	var got []string
	for _, n := range nodes {
		rem, err := f.view(t, n, key)
		if err != nil {
			t.Fatal(err)
		}
		ok = ok && rem == want[n.name]
		got = append(got, fmt.Sprintf("%s remaining=%d (want %d)", n.name, rem, want[n.name]))
	}
	return ok, strings.Join(got, ", ")
}
