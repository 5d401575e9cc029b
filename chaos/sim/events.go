package sim

import (
	"container/heap"

	"github.com/sluicehq/sluice/counter"
)

type eventKind uint8

const (
	evRequest eventKind = iota // the next arrival from the traffic source
	evTick                     // a node's sync round
	evDeliver                  // a delta reaches a node
	evGiveUp                   // a check's wait for its owner's answer ends
)

type event struct {
	at    int64
	seq   uint64 // ties break in scheduling order, which keeps runs reproducible
	kind  eventKind
	node  int
	delta *counter.Delta
	check uint64 // for evGiveUp, the waiting check
}

// queue is a min-heap of events by (at, seq).
type queue struct {
	items []event
	seq   uint64
}

func (q *queue) Len() int { return len(q.items) }
func (q *queue) Less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
func (q *queue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *queue) Push(x any)    { q.items = append(q.items, x.(event)) }
func (q *queue) Pop() any {
	n := len(q.items) - 1
	e := q.items[n]
	q.items[n] = event{}
	q.items = q.items[:n]
	return e
}

func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	heap.Push(q, e)
}

func (q *queue) pop() event { return heap.Pop(q).(event) }
