package strict

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// changes tells the strict group's goroutines that something they wait on
// may have changed: Raft's leader, state or peers, the rules the log
// decides, or the live members. It is a broadcast that carries no news: a
// waiter takes changed() before it looks at the state it waits on, and
// looks again once the channel closes, so no change between its look and
// its wait goes unseen.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func newChanges() *changes { return &changes{ch: make(chan struct{})} }

// changed returns a channel closed at the next change.
func (c *changes) changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// notify wakes everyone waiting on changed.
func (c *changes) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.ch)
	c.ch = make(chan struct{})
}

// raftWatch turns the observations of one Raft instance into notifications
// of a changes. Its goroutine belongs to the group whose Raft it watches:
// stop ends it.
type raftWatch struct {
	r       *raft.Raft
	obs     *raft.Observer
	stopCh  chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// watchRaft registers an observer of r's leader, state and peer changes
// and notifies c of each until stop. It counts in elected each leader it
// sees: one other than the last it saw, or one after a spell without. An
// observation Raft drops stands in the one already waiting, which reads
// the leader afresh, so two elections quicker than the watch may count as
// one.
func watchRaft(r *raft.Raft, c *changes, elected *atomic.Int64) *raftWatch {
	// One slot, and Raft never blocks on it: Raft drops an observation it
	// cannot hand over, and the one already waiting stands for it, for
	// every waiter reads the state itself rather than the observation.
	ch := make(chan raft.Observation, 1)
	w := &raftWatch{r: r, stopCh: make(chan struct{}), stopped: make(chan struct{}),
		obs: raft.NewObserver(ch, false, func(o *raft.Observation) bool {
			switch o.Data.(type) {
			case raft.LeaderObservation, raft.RaftState, raft.PeerObservation:
				return true
			}
			return false
		})}
	r.RegisterObserver(w.obs)
	go func() {
		defer close(w.stopped)
		var last raft.ServerID
		seen := func() {
			_, id := r.LeaderWithID()
			if id != last && id != "" {
				elected.Add(1)
			}
			last = id
		}
		seen()
		for {
			select {
			case <-ch:
				seen()
				c.notify()
			case <-w.stopCh:
				return
			}
		}
	}()
	// Raft ran before the observer was registered: whatever changed
	// meanwhile is news too.
	c.notify()
	return w
}

// stop deregisters the observer and waits for the goroutine to end.
func (w *raftWatch) stop() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		w.r.DeregisterObserver(w.obs)
		close(w.stopCh)
		<-w.stopped
	})
}
