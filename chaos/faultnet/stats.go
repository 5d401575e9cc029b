package faultnet

import "sync/atomic"

// Stats count what the switchboard did with the traffic it carried.
type Stats struct {
	// Gossip packets: sent by a node; delivered to one; dropped by Drop;
	// dropped across a cut; lost because nobody listened at the address or
	// the receiver's queue was full.
	PacketsSent, PacketsDelivered, PacketsDropped, PacketsCut, PacketsLost atomic.Int64
	// Streams: dials that connected; dials that found the link cut.
	Dials, DialsBlocked atomic.Int64
	// Retransmits are lost segments and SYNs that TCP would send again.
	Retransmits atomic.Int64
}

// Stats returns the switchboard's counters.
func (sb *Switchboard) Stats() *Stats { return &sb.stats }
