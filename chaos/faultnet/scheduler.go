package faultnet

import (
	"container/heap"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// scheduler holds delayed packets and delivers each when it is due.
type scheduler struct {
	sb   *Switchboard
	mu   sync.Mutex
	due  pending
	wake chan struct{}
}

type delayed struct {
	at  time.Time
	seq uint64 // keeps packets due together in the order they were sent
	dst *gossipTransport
	pkt *memberlist.Packet
}

type pending struct {
	items []delayed
	seq   uint64
}

func (p *pending) Len() int { return len(p.items) }
func (p *pending) Less(i, j int) bool {
	a, b := p.items[i], p.items[j]
	if a.at.Equal(b.at) {
		return a.seq < b.seq
	}
	return a.at.Before(b.at)
}
func (p *pending) Swap(i, j int) { p.items[i], p.items[j] = p.items[j], p.items[i] }
func (p *pending) Push(x any)    { p.items = append(p.items, x.(delayed)) }
func (p *pending) Pop() any {
	n := len(p.items) - 1
	x := p.items[n]
	p.items[n] = delayed{}
	p.items = p.items[:n]
	return x
}

func newScheduler(sb *Switchboard) *scheduler {
	return &scheduler{sb: sb, wake: make(chan struct{}, 1)}
}

// add schedules pkt for dst at at.
func (s *scheduler) add(at time.Time, dst *gossipTransport, pkt *memberlist.Packet) {
	s.mu.Lock()
	s.due.seq++
	heap.Push(&s.due, delayed{at: at, seq: s.due.seq, dst: dst, pkt: pkt})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run delivers packets as they fall due, until done closes.
func (s *scheduler) run(done <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		wait := time.Hour
		for s.due.Len() > 0 {
			next := s.due.items[0]
			if d := time.Until(next.at); d > 0 {
				wait = d
				break
			}
			heap.Pop(&s.due)
			s.mu.Unlock()
			next.dst.deliver(next.pkt, &s.sb.stats)
			s.mu.Lock()
		}
		s.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-done:
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}
