package counter

import (
	"time"

	"github.com/sluicehq/sluice/window"
)

// slot is one key's counts in the two windows that matter: idx (the newest
// window held) at position 1 and idx−1 at position 0.
type slot struct {
	key string
	idx int64
	// own holds this incarnation's admitted hits; exact, never merged.
	own [2]int64
	// ver holds the table epoch (modulo 2^32, never 0) of the last change to
	// own, 0 for none, so a delta sends only what changed since the last
	// send.
	ver [2]uint32
	// x holds what only a clustered key needs; nil on a lone node keeps a
	// key small.
	x *shared
	// o holds what owner allocation needs, in place of x.
	o *owned
}

// shared is the part of a slot that peers and allocation need.
type shared struct {
	// demand is this incarnation's requested hits, admitted or not.
	demand [2]int64
	// peerAdm and peerDem are the sums over peers, kept so that a decision
	// does not walk the peer list.
	peerAdm [2]int64
	peerDem [2]int64
	peers   []peerEntry
	alloc   allocState
}

// peerEntry is one other incarnation's last reported counts for the key,
// and what it last announced for allocation.
type peerEntry struct {
	inc uint32
	adm [2]int64
	dem [2]int64

	heard    bool   // an announcement has arrived
	claim    int64  // budget reserved and not yet spent when announced
	need     int64  // demand in the interval before the announcement
	claimWin int64  // window the announcement was made in
	claimAt  int64  // when it arrived here
	claimSeq uint64 // sender's delta sequence, so a late delta cannot undo a newer one
	opening  int64  // what it may spend in a fresh fixed window before its first sync there
	opens    bool   // whether it said
}

// pos maps window index w to a position in the slot's arrays: 1 for idx, 0
// for idx−1, −1 for anything older.
func (s *slot) pos(w int64) int {
	switch w {
	case s.idx:
		return 1
	case s.idx - 1:
		return 0
	}
	return -1
}

// roll moves the slot forward so that idx is its newest window; open is
// the opening (owner allocation) every node had in the window that closes. Counts of
// windows that fall out are forgotten, including those of peers, which is
// how a dead incarnation's entries leave: only once their windows expire.
func (s *slot) roll(idx int64, w time.Duration, open int64) {
	shift := idx - s.idx
	if shift <= 0 {
		return
	}
	oldEnd := (s.idx + 1) * int64(w)
	if s.owned() != nil && shift == 1 && s.o.grantAt(oldEnd, oldEnd, w) > s.own[1] {
		// The owner counts the unspent grant as admitted in the window
		// that closed, until this node says what it admitted there.
		s.o.stranded = true
	}
	s.idx = idx
	if shift == 1 {
		s.own = [2]int64{s.own[1], 0}
		s.ver = [2]uint32{s.ver[1], 0}
	} else {
		s.own, s.ver = [2]int64{}, [2]uint32{}
	}
	if s.x != nil {
		s.x.roll(shift, idx)
	}
	if s.owned() != nil {
		s.o.roll(shift, oldEnd, w, open)
	}
}

func (x *shared) roll(shift, idx int64) {
	shift2 := func(a *[2]int64) {
		if shift == 1 {
			*a = [2]int64{a[1], 0}
		} else {
			*a = [2]int64{}
		}
	}
	shift2(&x.demand)
	shift2(&x.peerAdm)
	shift2(&x.peerDem)
	kept := x.peers[:0]
	for _, p := range x.peers {
		shift2(&p.adm)
		shift2(&p.dem)
		// A peer's announcement is kept while it is recent: a live peer
		// announces at least once a window, so silence for longer means
		// it has forgotten the key too.
		if p.adm != [2]int64{} || p.dem != [2]int64{} || p.heard && p.claimWin >= idx-1 {
			kept = append(kept, p)
		}
	}
	clear(x.peers[len(kept):])
	x.peers = kept
	x.alloc.roll(shift)
}

// counts returns the own and the whole-view counts for window idx and the
// one before it. The caller has rolled the slot, so idx ≤ s.idx.
func (s *slot) counts(idx int64) (own, view window.Counts) {
	switch s.pos(idx) {
	case 1:
		own = window.Counts{Prev: s.own[0], Curr: s.own[1]}
		view = own
		if s.x != nil {
			view.Prev += s.x.peerAdm[0]
			view.Curr += s.x.peerAdm[1]
		}
	case 0:
		own = window.Counts{Curr: s.own[0]}
		view = own
		if s.x != nil {
			view.Curr += s.x.peerAdm[0]
		}
	}
	return own, view
}

// peer returns the entry for incarnation inc, adding it if absent.
func (x *shared) peer(inc uint32) *peerEntry {
	for i := range x.peers {
		if x.peers[i].inc == inc {
			return &x.peers[i]
		}
	}
	x.peers = append(x.peers, peerEntry{inc: inc})
	return &x.peers[len(x.peers)-1]
}

// announce records what a peer announced for allocation with its entry for
// window w, unless a newer announcement is already held.
func (x *shared) announce(inc uint32, w int64, n news, at int64, seq uint64) {
	e := x.peer(inc)
	if e.heard && (w < e.claimWin || seq < e.claimSeq) {
		return
	}
	e.heard, e.claim, e.need, e.claimWin, e.claimAt, e.claimSeq = true, max(n.claim, 0), max(n.need, 0), w, at, seq
	e.opening, e.opens = max(n.opening, 0), n.opens
}

// mergePeer raises incarnation inc's counts at position p to at least adm
// and dem, keeping the sums in step.
func (x *shared) mergePeer(inc uint32, p int, adm, dem int64) {
	e := x.peer(inc)
	if adm > e.adm[p] {
		x.peerAdm[p] += adm - e.adm[p]
		e.adm[p] = adm
	}
	if dem > e.dem[p] {
		x.peerDem[p] += dem - e.dem[p]
		e.dem[p] = dem
	}
}

// stampOf is the stamp a change made in epoch e carries: e modulo 2^32,
// never 0, which stands for no change.
func stampOf(e uint64) uint32 {
	if v := uint32(e); v != 0 {
		return v
	}
	return 1
}

// changedSince reports whether a change stamped v was made at or after
// epoch since (0: at any time). Epochs are compared modulo 2^32, which holds
// while a slot's changes are fewer than 2^31 rounds old: a slot lives two
// windows.
func changedSince(v uint32, since uint64) bool {
	return v != 0 && (since == 0 || int32(v-stampOf(since)) >= 0)
}
