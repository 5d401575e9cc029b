package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// Unlike the rest of the package, a memory run starts no node: it drives
// counter.Replica directly, in virtual time, so that what it measures is the
// counter package's state and nothing of a running node's (sockets, gossip,
// goroutines), and so that the figure does not depend on the machine's
// speed.

// memoryRule is the name of the one rule a memory run checks, and
// memoryCount its count: the count changes no key's size.
const (
	memoryRule  = "bench"
	memoryCount = 1000
)

// Bounds and steps of a memory run.
const (
	// MaxMemoryNodes is the most replicas a memory run builds. Sync
	// traffic in a round grows with the number of pairs of nodes.
	MaxMemoryNodes = 256
	maxMemoryKeys  = maxKeys
	// pilotKeys and sampleKeys are the key counts measured first, to
	// project the heap a run at the full key count would take: the pilot
	// sizes the sample, the sample projects the run.
	pilotKeys  = 100
	sampleKeys = 1000
	// maxMemoryRounds bounds the sync rounds run before measuring; a run
	// whose replicas are still sending after that many reports it.
	maxMemoryRounds = 50
)

// memoryEpoch is where a memory run's virtual time starts by default (Unix
// nanoseconds), moved forward to a window boundary.
const memoryEpoch = int64(1_800_000_000) * int64(time.Second)

// MemoryConfig is one memory run: Nodes replicas sharing one batched rule,
// each checking every one of Keys keys once, then syncing until no replica
// has anything left to send. Start from MemoryDefaults.
type MemoryConfig struct {
	// Nodes is how many replicas share the rule, 1 … MaxMemoryNodes.
	Nodes int
	// Keys is how many distinct keys every replica checks.
	Keys int
	// Window, Type, Sync and Alloc make up the rule; the zero Alloc is
	// the default, owner allocation.
	Window time.Duration
	Type   window.Type
	Sync   time.Duration
	Alloc  window.Allocation
	// MaxHeap bounds the heap the run may build, in bytes: when the heap
	// projected for Keys from a smaller sample exceeds it, the run measures
	// the most keys that fit instead.
	MaxHeap int64
	// Start is the virtual moment (Unix nanoseconds) every check is made
	// at; sync round i runs at Start + i × Sync. Zero is a fixed moment on
	// a window boundary.
	Start int64
}

// MemoryDefaults returns a run of 3 nodes over 10,000 keys, 1000 per 60 s
// sliding, sync 100 ms, at most 8 GiB of heap.
func MemoryDefaults() MemoryConfig {
	return MemoryConfig{Nodes: 3, Keys: 10_000, Window: time.Minute, Type: window.Sliding,
		Sync: 100 * time.Millisecond, MaxHeap: 8 << 30}
}

// rule returns the one rule the run checks.
func (c *MemoryConfig) rule() window.Rule {
	return window.Rule{Name: memoryRule, Count: memoryCount, Window: c.Window, Type: c.Type,
		SyncInterval: c.Sync, Allocation: c.Alloc}
}

// start returns the moment of the run's checks.
func (c *MemoryConfig) start() int64 {
	if c.Start != 0 {
		return c.Start
	}
	return (memoryEpoch/int64(c.Window) + 1) * int64(c.Window)
}

// Validate checks c and returns an error that starts with the name of the
// first field out of range, as the `sluice bench memory` flag spells it.
func (c *MemoryConfig) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > MaxMemoryNodes:
		return fmt.Errorf("nodes: must be in [1, %d], got %d", MaxMemoryNodes, c.Nodes)
	case c.Keys < 1 || c.Keys > maxMemoryKeys:
		return fmt.Errorf("keys: must be in [1, %d], got %d", maxMemoryKeys, c.Keys)
	case c.Sync <= 0:
		return fmt.Errorf("sync: must be > 0, got %v: the run measures batched rules", c.Sync)
	case c.MaxHeap < 1<<20:
		return fmt.Errorf("max-heap: must be at least 1 MiB, got %d bytes", c.MaxHeap)
	case c.Start < 0:
		return fmt.Errorf("start: must be ≥ 0, got %d", c.Start)
	}
	r := c.rule()
	if err := r.Validate(); err != nil {
		var fe *window.FieldError
		if errors.As(err, &fe) {
			flag := map[string]string{"time_window": "rule-window", "sync_interval": "sync", "window_type": "type"}[fe.Field]
			if flag != "" {
				return fmt.Errorf("%s: %s", flag, fe.Problem)
			}
		}
		return err
	}
	return nil
}

// MemoryResult is what a memory run measured.
type MemoryResult struct {
	Nodes int `json:"nodes"`
	// Keys is the key count asked for; KeysMeasured the one measured,
	// fewer when Keys would not fit in MaxHeapBytes.
	Keys         int `json:"keys"`
	KeysMeasured int `json:"keys_measured"`
	// BytesPerKey is HeapBytes ÷ (Nodes × KeysMeasured): the heap one
	// active key takes on one node, its own counts and every peer's.
	BytesPerKey float64 `json:"bytes_per_key"`
	// HeapBytes is the live heap after the run less the live heap before
	// it, both read after two garbage collections.
	HeapBytes int64 `json:"heap_bytes"`
	// ProjectedHeapBytes is the heap Keys would take, from the bytes per
	// key of a sample of SampleKeys keys (zero when Keys was the sample).
	ProjectedHeapBytes int64      `json:"projected_heap_bytes,omitempty"`
	SampleKeys         int        `json:"sample_keys,omitempty"`
	MaxHeapBytes       int64      `json:"max_heap_bytes"`
	Rule               MemoryRule `json:"rule"`
	// Admitted is how many of the Nodes × KeysMeasured checks the rule
	// admitted; refused ones take memory too.
	Admitted int64 `json:"admitted"`
	// Rounds is how many sync rounds ran, the last of them sending nothing
	// when Quiescent; EntriesDelivered is the entries every delta of those
	// rounds carried, all merged through Replica.Receive.
	Rounds           int   `json:"sync_rounds"`
	Quiescent        bool  `json:"quiescent"`
	Deltas           int64 `json:"deltas_delivered"`
	EntriesDelivered int64 `json:"entries_delivered"`
}

// MemoryRule describes the rule a memory run checked.
type MemoryRule struct {
	Name       string  `json:"name"`
	Count      int64   `json:"count"`
	WindowS    float64 `json:"window_s"`
	Type       string  `json:"type"`
	SyncS      float64 `json:"sync_s"`
	Allocation string  `json:"allocation"`
}

// Capped reports whether fewer keys were measured than asked for.
func (r *MemoryResult) Capped() bool { return r.KeysMeasured < r.Keys }

// Memory measures the heap that c.Nodes replicas hold when every one of
// them has checked every one of c.Keys keys and merged what the others sent
// (the worst case: every node active on every key), in bytes per key per
// node. Every delta a replica's Tick returns goes to its destination's
// Receive; which replicas send what to whom is the counter package's
// business, not assumed here.
//
// It first measures a small sample of keys and projects the heap for c.Keys;
// when that exceeds c.MaxHeap it measures the most keys that fit instead.
// The collector lets the heap grow to twice the live heap between cycles
// (GOGC=100), so the process may briefly hold about 2 × c.MaxHeap; a
// program that owns the process can bound that with debug.SetMemoryLimit,
// as `sluice bench memory` does.
func Memory(ctx context.Context, c MemoryConfig) (*MemoryResult, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// The pilot sizes the sample, the sample projects the heap for c.Keys.
	m, err := measureMemory(ctx, &c, min(c.Keys, pilotKeys))
	if err != nil || m.KeysMeasured == c.Keys {
		return finish(m, &c, err)
	}
	perKey := m.BytesPerKey
	if sample := min(c.Keys, sampleKeys, fitKeys(m.BytesPerKey, c.Nodes, c.MaxHeap/4)); sample > m.KeysMeasured {
		if m, err = measureMemory(ctx, &c, sample); err != nil || m.KeysMeasured == c.Keys {
			return finish(m, &c, err)
		}
	}
	sample := m.KeysMeasured
	// A small heap measured beside other work in the process (a test
	// binary's other tests) can come out too small, even below zero: the
	// projection takes the larger of the two figures, and a sample that
	// measured nothing is not grown from.
	perKey = max(perKey, m.BytesPerKey)
	if perKey <= 0 {
		if m, err = measurePositive(ctx, &c, sample); err != nil {
			return nil, err
		}
		perKey = m.BytesPerKey
	}
	projected := perKey * float64(c.Nodes) * float64(c.Keys)
	keys := c.Keys
	if projected > float64(c.MaxHeap) {
		keys = fitKeys(perKey, c.Nodes, c.MaxHeap)
		if keys >= sampleKeys {
			keys -= keys % sampleKeys
		}
	}
	if keys > sample {
		if m, err = measurePositive(ctx, &c, keys); err != nil {
			return nil, err
		}
	}
	m.SampleKeys, m.ProjectedHeapBytes = sample, int64(min(projected, math.MaxInt64))
	return finish(m, &c, nil)
}

// finish fills in what every result of c says, or passes err on.
func finish(m *MemoryResult, c *MemoryConfig, err error) (*MemoryResult, error) {
	if err != nil {
		return nil, err
	}
	m.Keys, m.MaxHeapBytes = c.Keys, c.MaxHeap
	return m, nil
}

// fitKeys returns how many keys fit in budget bytes at bytesPerKey per key
// per node, at least 1.
func fitKeys(bytesPerKey float64, nodes int, budget int64) int {
	if bytesPerKey <= 0 {
		return maxMemoryKeys
	}
	return int(max(1, min(float64(maxMemoryKeys), float64(budget)/(bytesPerKey*float64(nodes)))))
}

// measurePositive measures keys keys up to four times until the heap they
// hold comes out above zero. Memory freed elsewhere in the process while a
// fleet is built (a network library's goroutine outliving its Close by a
// probe timeout) is subtracted from the fleet's figure, and a few MiB of it
// can take a small fleet below zero.
func measurePositive(ctx context.Context, c *MemoryConfig, keys int) (*MemoryResult, error) {
	var m *MemoryResult
	for range 4 {
		var err error
		if m, err = measureMemory(ctx, c, keys); err != nil || m.BytesPerKey > 0 {
			return m, err
		}
	}
	return nil, fmt.Errorf("the heap of %d keys measured %d bytes four times: something else in the process is freeing memory", keys, m.HeapBytes)
}

// measureMemory builds c.Nodes replicas, has each check keys keys and syncs
// them until quiescent, and returns the heap they hold.
func measureMemory(ctx context.Context, c *MemoryConfig, keys int) (*MemoryResult, error) {
	// The names exist before the baseline: the replicas' copies of them
	// are theirs, the caller's are not.
	names := make([]string, keys)
	for i := range names {
		names[i] = "user:" + strconv.Itoa(10_000_000+i)
	}
	before := heapAlloc()
	res := &MemoryResult{Nodes: c.Nodes, KeysMeasured: keys}
	nodes, err := buildMemoryFleet(ctx, c, names, res)
	if err != nil {
		return nil, err
	}
	after := heapAlloc()
	// Both must survive the second read: a replica collected before it
	// would make the figure too small, names collected would too.
	runtime.KeepAlive(nodes)
	runtime.KeepAlive(names)

	rule := c.rule()
	res.Rule = MemoryRule{Name: rule.Name, Count: rule.Count, WindowS: rule.Window.Seconds(), Type: rule.Type.String(),
		SyncS: rule.SyncInterval.Seconds(), Allocation: rule.Allocation.String()}
	res.HeapBytes = int64(after) - int64(before)
	res.BytesPerKey = float64(res.HeapBytes) / (float64(c.Nodes) * float64(keys))
	return res, nil
}

// buildMemoryFleet returns the replicas after every one has checked every
// key and synced until no replica had anything to send, or for
// maxMemoryRounds rounds. It records the checks admitted and the sync
// traffic in res.
func buildMemoryFleet(ctx context.Context, c *MemoryConfig, keys []string, res *MemoryResult) ([]*counter.Replica, error) {
	rule := c.rule()
	start := c.start()
	nodes := make([]*counter.Replica, c.Nodes)
	incs := make([]counter.Incarnation, c.Nodes)
	index := make(map[counter.Incarnation]int, c.Nodes)
	for i := range nodes {
		incs[i] = counter.Incarnation{Node: fmt.Sprintf("n%03d", i), Boot: 1}
		index[incs[i]] = i
		r, err := counter.NewReplica(counter.Config{Self: incs[i], Rules: []window.Rule{rule}, Start: start})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", incs[i].Node, err)
		}
		nodes[i] = r
	}
	for _, r := range nodes {
		r.SetPeers(incs)
	}
	for i, r := range nodes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, k := range keys {
			d, err := r.Allow(start, rule.Name, k, 1)
			if err != nil {
				return nil, fmt.Errorf("node %s: key %q: %w", incs[i].Node, k, err)
			}
			if d.Allowed {
				res.Admitted++
			}
		}
	}
	now := start
	for res.Rounds < maxMemoryRounds && !res.Quiescent {
		now += int64(c.Sync)
		res.Rounds++
		var entries int64
		// Each sender's deltas are delivered before the next sender ticks,
		// so only one sender's messages are in flight at a time: they are
		// not part of what a node holds.
		for i, r := range nodes {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for _, o := range r.Tick(now) {
				j, ok := index[o.To]
				if !ok {
					return nil, fmt.Errorf("node %s sent a delta to %s, which is not in the fleet", incs[i].Node, o.To.Node)
				}
				rr, err := nodes[j].Receive(now, o.Delta)
				if err != nil {
					return nil, fmt.Errorf("node %s receiving from %s: %w", incs[j].Node, incs[i].Node, err)
				}
				if len(rr.UnknownRules) > 0 {
					return nil, fmt.Errorf("node %s receiving from %s: unknown rules %q", incs[j].Node, incs[i].Node, rr.UnknownRules)
				}
				res.Deltas++
				entries += int64(o.Delta.Size())
				if rr.Reply != nil {
					// An owner's answer goes back at once, as a node sends it.
					if _, err := r.Receive(now, rr.Reply.Delta); err != nil {
						return nil, fmt.Errorf("node %s receiving an answer from %s: %w", incs[i].Node, incs[j].Node, err)
					}
					res.Deltas++
					entries += int64(rr.Reply.Delta.Size())
				}
			}
		}
		res.EntriesDelivered += entries
		res.Quiescent = entries == 0
	}
	return nodes, nil
}

// heapAlloc returns the bytes of live heap objects after two garbage
// collections: the first may leave objects that finalizers or the sweeper
// free only in the second.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
