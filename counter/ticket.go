package counter

import (
	"github.com/sluicehq/sluice/window"
)

// Ticket says where a decision counted the hits it admitted: the rule, the
// key, the window and how many, so that Refund can give them back. The zero
// Ticket counted nothing (a refusal, a check of 0 hits, or an admission
// with no window left to count it in).
type Ticket struct {
	// Rule and Key name what the hits were counted for.
	Rule, Key string
	// Window is the index of the window the hits were counted in (see
	// window.Index).
	Window int64
	// Hits is how many were counted; Refund sets it to 0.
	Hits int64

	// counts identifies the table's counts: a reload that keeps the
	// rule's window shares them, any other makes a table of its own,
	// which the ticket's hits were never counted in.
	counts *[shardCount]shard
	// alloc is the allocation state whose spending since its last sync
	// the hits were also counted in (adaptive and classic allocation, on
	// a clustered key), and syncs its sync count then; nil when they were
	// counted in the key's own counts alone.
	alloc *allocState
	syncs uint32
	// strict is whether the rule was strict when the hits were counted: a
	// reload that turns a rule strict or back hands its counts to or from
	// a log, and the ticket's hits go with them.
	strict bool
}

// Counted reports whether the ticket holds hits to give back.
func (tk Ticket) Counted() bool { return tk.Hits > 0 }

// ticket is the ticket for hits counted in slot s of t at window idx; a
// is the allocation state that counted them too, or nil.
func (t *Table) ticket(s *slot, idx, hits int64, a *allocState) Ticket {
	tk := Ticket{Rule: t.rule.Name, Key: s.key, Window: idx, Hits: hits, counts: t.shards, alloc: a, strict: t.rule.IsStrict()}
	if a != nil {
		tk.syncs = a.syncs
	}
	return tk
}

// Refund gives back, at moment now, the hits tk counted, where the window
// still holds them, and returns how many it gave back; it empties tk, so
// that refunding it again gives back nothing (a copy of a ticket must not
// be refunded twice). A window holds its hits until it ends; on a node
// alone, a sliding window's hits can also be given back in the window
// after it, whose estimate they still weigh on. Nothing is given back
// once a reload changed the rule's window (its counts started afresh),
// turned it strict or back, or removed it. A strict rule's ticket holds hits this replica counted
// itself: a strict log's state machine, which gives back the admitted
// parts of a group another part refused, or a node's fail-local answers;
// a decision of the log on a node carries no ticket.
//
// A refund lowers this node's own count, never below zero, so that the
// window admits again what was given back and never more than its count
// in all. Peers count a node's hits by the most it ever reported for a
// window, so they learn of a refund only as the node's count grows past
// where it was: until then they count the hits as spent, which errs toward
// refusing, never toward admitting more than the count. Under classic
// allocation, which reproduces a gateway's cached budget, hits already
// pushed at a sync stay spent from that budget until the next sync.
func (r *Replica) Refund(tk *Ticket, now int64) int64 {
	if tk == nil || tk.Hits <= 0 {
		return 0
	}
	t := (*r.tables.Load())[tk.Rule]
	defer func() { tk.Hits = 0 }()
	if t == nil || t.shards != tk.counts || t.rule.IsStrict() != tk.strict {
		return 0
	}
	return t.refund(tk, now)
}

// Reserve is Allow that also returns the ticket for the hits it counted.
func (r *Replica) Reserve(now int64, rule, key string, hits int64) (window.Decision, Ticket, error) {
	t := (*r.tables.Load())[rule]
	if t == nil {
		return window.Decision{}, Ticket{}, UnknownRule(rule)
	}
	if err := t.check(key, hits); err != nil {
		return window.Decision{}, Ticket{}, err
	}
	var tk Ticket
	d, _, err := t.try(key, now, hits, askNever, &tk)
	d.At = now
	return d, tk, err
}

// refund gives back tk's hits at moment now; see Replica.Refund.
func (t *Table) refund(tk *Ticket, now int64) int64 {
	idx := window.Index(now, t.rule.Window)
	switch {
	case tk.Window == idx:
	case tk.Window == idx-1 && t.rule.Type == window.Sliding && t.live.Load() <= 1:
		// Alone, the node's view is exact and the previous window's count
		// is its own to lower. In a fleet, what that count's decay
		// releases has been handed out already (an owner's lines, adaptive
		// release rates): lowering it would free the same room twice.
	default:
		return 0
	}
	sh, h := t.shardOf(tk.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.lookup(tk.Key, h)
	if s == nil {
		return 0
	}
	s.roll(idx, t.rule.Window, t.opening())
	p := s.pos(tk.Window)
	if p < 0 {
		return 0
	}
	n := min(tk.Hits, s.own[p])
	if n <= 0 {
		return 0
	}
	s.own[p] -= n
	// The allocation's spending since its last sync holds the hits only
	// while no sync (nor a reload's reset) has started it afresh.
	if x := s.x; x != nil && &x.alloc == tk.alloc && x.alloc.syncs == tk.syncs {
		x.alloc.spent -= min(n, x.alloc.spent)
	}
	return n
}
