package raftstore_test

import (
	"testing"

	"github.com/hashicorp/raft"
	raftbench "github.com/hashicorp/raft/bench"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/raftstore"
)

// benchBackends are the configurations benchmarked: in memory, on disk with
// the default synced writes Raft needs, and on disk without syncing.
var benchBackends = []backend{
	{name: "memory"},
	{name: "disk", disk: true},
	{name: "disk-nosync", disk: true, opts: []store.Option{store.WithSync(false)}},
}

// runBench runs one raftbench function against a fresh store per backend.
func runBench(b *testing.B, fn func(*testing.B, *raftstore.Store)) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			b.ReportAllocs()
			fn(b, be.open(b))
		})
	}
}

func BenchmarkFirstIndex(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.FirstIndex(b, s) })
}

func BenchmarkLastIndex(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.LastIndex(b, s) })
}

func BenchmarkGetLog(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.GetLog(b, s) })
}

func BenchmarkStoreLog(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.StoreLog(b, s) })
}

func BenchmarkStoreLogs(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.StoreLogs(b, s) })
}

func BenchmarkDeleteRange(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.DeleteRange(b, s) })
}

func BenchmarkSet(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.Set(b, s) })
}

func BenchmarkGet(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.Get(b, s) })
}

func BenchmarkSetUint64(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.SetUint64(b, s) })
}

func BenchmarkGetUint64(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) { raftbench.GetUint64(b, s) })
}

// BenchmarkStoreLogsRaftBatch stores batches the size Raft's default
// MaxAppendEntries produces, with a realistic small command payload.
func BenchmarkStoreLogsRaftBatch(b *testing.B) {
	runBench(b, func(b *testing.B, s *raftstore.Store) {
		const batch = 64
		logs := make([]*raft.Log, batch)
		for i := range logs {
			logs[i] = &raft.Log{Term: 1, Data: make([]byte, 128)}
		}
		next := uint64(1)
		for b.Loop() {
			for _, l := range logs {
				l.Index = next
				next++
			}
			if err := s.StoreLogs(logs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
