package counter

import (
	"sync"
	"time"
)

// roundTrips estimates, per peer, how long a report takes to be answered,
// from the moments reports are sent and their answers arrive. A node whose
// owner is far away spends from its grant for a round trip before a new
// grant can land, so it asks for that much more.
type roundTrips struct {
	// askTimeout is how long a check waits for an owner's answer (0: no
	// limit).
	askTimeout time.Duration

	mu   sync.Mutex
	est  map[uint32]int64 // peer → smoothed round trip, nanoseconds
	sent map[uint32]sentReport
}

// sentReport is the last report sent to a peer: its sequence and moment.
type sentReport struct {
	seq uint64
	at  int64
}

func newRoundTrips(askTimeout time.Duration) *roundTrips {
	return &roundTrips{askTimeout: askTimeout, est: map[uint32]int64{}, sent: map[uint32]sentReport{}}
}

// inTime reports whether a question to an owner rtt away is answered
// before the check that asked gives up.
func (rt *roundTrips) inTime(rtt int64) bool {
	return rt.askTimeout <= 0 || rtt < int64(rt.askTimeout)
}

// reported records that the report with sequence seq went to peer at
// moment at; a report still unanswered keeps its place, so that a round
// trip is measured from the first report of those an answer covers.
func (rt *roundTrips) reported(peer uint32, seq uint64, at int64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, waiting := rt.sent[peer]; !waiting {
		rt.sent[peer] = sentReport{seq: seq, at: at}
	}
}

// answered records that an answer from peer to reports up to sequence told
// arrived at moment at.
func (rt *roundTrips) answered(peer uint32, told uint64, at int64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	s, ok := rt.sent[peer]
	if !ok || told < s.seq || at < s.at {
		return
	}
	delete(rt.sent, peer)
	sample := at - s.at
	if e, ok := rt.est[peer]; ok {
		sample = e - e/8 + sample/8
	}
	rt.est[peer] = sample
}

// of returns the estimated round trip to peer, 0 while none is known.
func (rt *roundTrips) of(peer uint32) int64 {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.est[peer]
}

// RoundTrip returns the round trip to peer as this node measures it: from
// the moment a report to the peer, as the owner of the report's keys, is
// sent to the moment its answer arrives, smoothed over the last several
// (each answer weighs an eighth). It reports false while none has been
// measured: until this node has asked the peer as an owner, or under
// allocations that ask no owner.
func (r *Replica) RoundTrip(peer Incarnation) (time.Duration, bool) {
	id, ok := r.reg.lookup(peer)
	if !ok {
		return 0, false
	}
	est := r.rtt.of(id)
	return time.Duration(est), est > 0
}

// forget drops what is known of peer.
func (rt *roundTrips) forget(peer uint32) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	delete(rt.est, peer)
	delete(rt.sent, peer)
}
