package cluster

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
	"golang.org/x/time/rate"
)

// benchRule never refuses in a benchmark, so every iteration takes the same
// path: the admission path.
var benchRule = window.Rule{Name: "api", Count: window.MaxCount, Window: time.Second,
	Type: window.Sliding, SyncInterval: 200 * time.Millisecond}

func startBench(b *testing.B) *Node {
	b.Helper()
	n, err := Start(context.Background(), Config{Name: "bench", Rules: []window.Rule{benchRule}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}

// BenchmarkRateLimiterAllow is the reference: a single in-process token
// bucket, which reads the clock and takes a lock per call just as Allow does.
func BenchmarkRateLimiterAllow(b *testing.B) {
	l := rate.NewLimiter(rate.Inf, 1)
	b.ReportAllocs()
	for b.Loop() {
		l.Allow()
	}
}

// BenchmarkAllow checks one existing key from one goroutine.
func BenchmarkAllow(b *testing.B) {
	n := startBench(b)
	ctx := context.Background()
	if _, err := n.Allow(ctx, "api", "user:42", 1); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		n.Allow(ctx, "api", "user:42", 1)
	}
}

// BenchmarkLimiterAllow is BenchmarkAllow through a rule's handle.
func BenchmarkLimiterAllow(b *testing.B) {
	n := startBench(b)
	ctx := context.Background()
	lim, err := n.Limiter("api")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := lim.Allow(ctx, "user:42"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		lim.Allow(ctx, "user:42")
	}
}

// BenchmarkAllowParallel checks 10,000 existing keys from GOMAXPROCS
// goroutines; with no global lock it scales with cores.
func BenchmarkAllowParallel(b *testing.B) {
	n := startBench(b)
	ctx := context.Background()
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
		n.Allow(ctx, "api", keys[i], 1)
	}
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := seed.Add(7919) // each goroutine starts at its own key
		for pb.Next() {
			i++
			n.Allow(ctx, "api", keys[i%uint64(len(keys))], 1)
		}
	})
}

// BenchmarkMemoryPerKey holds 1,000,000 distinct keys in one window and
// reports the heap they take per key.
func BenchmarkMemoryPerKey(b *testing.B) {
	const keys = 1_000_000
	names := make([]string, keys)
	for i := range names {
		names[i] = "user:" + strconv.Itoa(1_000_000+i)
	}
	for b.Loop() {
		b.StopTimer()
		before := heapInUse()
		b.StartTimer()
		n, err := Start(context.Background(), Config{Name: "mem", Rules: []window.Rule{benchRule},
			Now: func() time.Time { return time.Unix(0, 1_800_000_000_000_000_000) }})
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range names {
			n.Allow(context.Background(), "api", k, 1)
		}
		b.StopTimer()
		after := heapInUse()
		// The key strings are counted as the node's own: it clones them.
		b.ReportMetric(float64(after-before)/keys, "bytes/key")
		runtime.KeepAlive(n)
		n.Close()
		b.StartTimer()
	}
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
