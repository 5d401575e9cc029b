package raftstore_test

import (
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store/raftstore"
)

// countFSM is a Raft state machine that sums the uint64 commands applied to it.
type countFSM struct {
	mu      sync.Mutex
	sum     uint64
	applied int
}

// Apply adds a command's value to the sum.
func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum += binary.BigEndian.Uint64(l.Data)
	f.applied++
	return nil
}

// Snapshot captures the sum.
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return countSnapshot{sum: f.sum, applied: f.applied}, nil
}

// Restore replaces the state with a snapshot's.
func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var buf [16]byte
	if _, err := io.ReadFull(rc, buf[:]); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum = binary.BigEndian.Uint64(buf[:8])
	f.applied = int(binary.BigEndian.Uint64(buf[8:]))
	return nil
}

// state returns the sum and the number of commands behind it.
func (f *countFSM) state() (sum uint64, applied int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sum, f.applied
}

// countSnapshot is a countFSM snapshot.
type countSnapshot struct {
	sum     uint64
	applied int
}

// Persist writes the snapshot.
func (s countSnapshot) Persist(sink raft.SnapshotSink) error {
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], s.sum)
	binary.BigEndian.PutUint64(buf[8:], uint64(s.applied))
	if _, err := sink.Write(buf[:]); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release does nothing.
func (countSnapshot) Release() {}

// testRaftConfig returns a quiet, fast single-node configuration that keeps
// only a few log entries after a snapshot, so compaction calls DeleteRange.
func testRaftConfig() *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = "node-1"
	conf.LogOutput = io.Discard
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.TrailingLogs = 5
	conf.SnapshotThreshold = 1 << 30 // snapshot only when asked
	conf.SnapshotInterval = time.Hour
	return conf
}

// startRaft starts a node on s and waits until it leads.
func startRaft(t *testing.T, conf *raft.Config, s *raftstore.Store, snaps raft.SnapshotStore, fsm raft.FSM) *raft.Raft {
	t.Helper()
	_, trans := raft.NewInmemTransport(raft.ServerAddress(conf.LocalID))
	r, err := raft.NewRaft(conf, fsm, s, s, snaps, trans)
	if err != nil {
		t.Fatalf("NewRaft: %v", err)
	}
	// LeaderCh says when leadership is won (or lost); the deadline only
	// turns a hang into a failure, however slow the machine.
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for r.State() != raft.Leader {
		select {
		case <-r.LeaderCh():
		case <-deadline.C:
			r.Shutdown()
			t.Fatalf("node did not become leader within a minute; state %v", r.State())
		}
	}
	return r
}

// apply commits the commands first..last, each adding its own number.
func apply(t *testing.T, r *raft.Raft, first, last uint64) {
	t.Helper()
	for v := first; v <= last; v++ {
		if err := r.Apply(binary.BigEndian.AppendUint64(nil, v), 5*time.Second).Error(); err != nil {
			t.Fatalf("Apply(%d): %v", v, err)
		}
	}
}

// TestRaftNode runs a real Raft node on a Store through bootstrap, commands,
// a snapshot with log compaction, and a restart from the same storage.
func TestRaftNode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		dir := ""
		if b.disk {
			dir = t.TempDir()
		}
		s, err := openStore(dir)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer func() { s.Close() }()
		snaps := raft.NewInmemSnapshotStore()
		conf := testRaftConfig()

		// A fresh store has no state: this relies on GetUint64 reporting
		// a missing current term as "not found".
		if has, err := raft.HasExistingState(s, s, snaps); err != nil || has {
			t.Fatalf("HasExistingState on new store = %t, %v; want false, nil", has, err)
		}
		boot := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: raft.ServerAddress(conf.LocalID)}}}
		_, trans := raft.NewInmemTransport(raft.ServerAddress(conf.LocalID))
		if err := raft.BootstrapCluster(conf, s, s, snaps, trans, boot); err != nil {
			t.Fatalf("BootstrapCluster: %v", err)
		}

		fsm := &countFSM{}
		r := startRaft(t, conf, s, snaps, fsm)
		apply(t, r, 1, 30)
		if err := r.Snapshot().Error(); err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		first, last := indexes(t, s)
		if first <= 1 || last-first+1 > uint64(conf.TrailingLogs) {
			t.Fatalf("after snapshot log holds %d..%d; want at most %d trailing entries", first, last, conf.TrailingLogs)
		}
		apply(t, r, 31, 40)
		if err := r.Shutdown().Error(); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term == 0 {
			t.Fatalf("CurrentTerm = %d, %v; want a positive term", term, err)
		}

		if b.disk {
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if s, err = openStore(dir); err != nil {
				t.Fatalf("reopen: %v", err)
			}
		}
		if has, err := raft.HasExistingState(s, s, snaps); err != nil || !has {
			t.Fatalf("HasExistingState after restart = %t, %v; want true, nil", has, err)
		}
		if err := raft.BootstrapCluster(conf, s, s, snaps, trans, boot); !errors.Is(err, raft.ErrCantBootstrap) {
			t.Fatalf("BootstrapCluster on existing state = %v; want ErrCantBootstrap", err)
		}

		// The restarted node rebuilds its state from the snapshot plus
		// the log entries stored after it.
		fsm = &countFSM{}
		r = startRaft(t, conf, s, snaps, fsm)
		defer r.Shutdown()
		if err := r.Barrier(5 * time.Second).Error(); err != nil {
			t.Fatalf("Barrier: %v", err)
		}
		apply(t, r, 41, 45)
		const wantSum = 45 * 46 / 2
		if sum, n := fsm.state(); sum != wantSum || n != 45 {
			t.Fatalf("after restart FSM has sum %d of %d commands; want %d of 45", sum, n, wantSum)
		}
	})
}
