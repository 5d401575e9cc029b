package cluster

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// BenchmarkAllowClustered is BenchmarkAllow on one node of a 3-node cluster
// on loopback, while background traffic on the other nodes keeps 1,000 keys
// changing, so every sync round carries deltas both ways. Admission reads
// only local state, so it should cost about what it costs alone.
func BenchmarkAllowClustered(b *testing.B) {
	rule := benchRule
	rule.SyncInterval = 50 * time.Millisecond
	cl := startCluster(b, 3, []window.Rule{rule}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var background atomic.Int64
	for _, nd := range cl[1:] {
		go func() {
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = "bg:" + strconv.Itoa(i)
			}
			for i := 0; ctx.Err() == nil; i++ {
				nd.Allow(ctx, rule.Name, keys[i%len(keys)], 1)
				background.Add(1)
				if i%10 == 0 {
					time.Sleep(5 * time.Millisecond) // about 2,000 checks/s per node: sync traffic, not a CPU hog
				}
			}
		}()
	}
	n := cl[0]
	if _, err := n.Allow(ctx, rule.Name, "user:42", 1); err != nil {
		b.Fatal(err)
	}
	recv := n.metrics.DeltasReceived.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n.Allow(ctx, rule.Name, "user:42", 1)
	}
	b.StopTimer()
	if n.metrics.DeltasReceived.Load() == recv && b.N > 1000 {
		b.Fatal("no sync traffic reached the benchmarked node")
	}
}
