package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// A small real run: every key held on every node, peers' counts merged,
// at a plausible size per key. The bounds are loose on purpose: the figure
// belongs to the counter package and will move with it.
func TestMemorySmallFleet(t *testing.T) {
	tests := []struct {
		name  string
		nodes int
		typ   window.Type
	}{
		{"three nodes sliding", 3, window.Sliding},
		{"three nodes fixed", 3, window.Fixed},
		{"lone node", 1, window.Sliding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := MemoryDefaults()
			c.Nodes, c.Keys, c.Type = tt.nodes, 2000, tt.typ
			r, err := Memory(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%.0f bytes per key per node, heap %d, %d rounds, %d deltas, %d entries",
				r.BytesPerKey, r.HeapBytes, r.Rounds, r.Deltas, r.EntriesDelivered)
			if r.Nodes != tt.nodes || r.Keys != 2000 || r.KeysMeasured != 2000 || r.Capped() {
				t.Errorf("nodes %d keys %d measured %d, want %d, 2000, 2000", r.Nodes, r.Keys, r.KeysMeasured, tt.nodes)
			}
			if r.BytesPerKey < 50 || r.BytesPerKey > 100_000 {
				t.Errorf("%.1f bytes per key per node, want within [50, 100000]", r.BytesPerKey)
			}
			if want := int64(tt.nodes) * 2000; r.Admitted != want {
				t.Errorf("admitted %d of %d checks, want all (count %d per key)", r.Admitted, want, r.Rule.Count)
			}
			if !r.Quiescent {
				t.Errorf("still sending after %d rounds", r.Rounds)
			}
			switch {
			case tt.nodes == 1 && r.Deltas != 0:
				t.Errorf("a lone node sent %d deltas", r.Deltas)
			case tt.nodes > 1 && r.EntriesDelivered < 2000:
				// Whatever the design, every node's counts for every key
				// must reach someone for the fleet to count them.
				t.Errorf("%d entries delivered for %d nodes × 2000 keys", r.EntriesDelivered, tt.nodes)
			}
			if r.Rule.Type != tt.typ.String() || r.Rule.Allocation != "owner" || r.Rule.WindowS != 60 || r.Rule.SyncS != 0.1 {
				t.Errorf("rule %+v, want the defaults with type %v", r.Rule, tt.typ)
			}
		})
	}
}

// When the keys asked for would not fit in MaxHeap, fewer are measured, and
// the result says how many and what the whole would have needed.
func TestMemoryCapsKeysToMaxHeap(t *testing.T) {
	c := MemoryDefaults()
	// Large enough that a few MiB freed by earlier tests' libraries while
	// it measures do not swamp the figure.
	c.Nodes, c.Keys, c.MaxHeap = 3, 1_000_000, 32<<20
	r, err := Memory(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured %d of %d keys, projected %d bytes from %d, heap %d", r.KeysMeasured, r.Keys, r.ProjectedHeapBytes, r.SampleKeys, r.HeapBytes)
	if !r.Capped() || r.KeysMeasured < 1 || r.KeysMeasured >= c.Keys {
		t.Fatalf("measured %d of %d keys, want fewer but some", r.KeysMeasured, c.Keys)
	}
	if r.ProjectedHeapBytes <= c.MaxHeap || r.SampleKeys < 1 || r.MaxHeapBytes != c.MaxHeap {
		t.Errorf("projected %d bytes from %d keys, max %d; want a projection over the max", r.ProjectedHeapBytes, r.SampleKeys, r.MaxHeapBytes)
	}
	if r.BytesPerKey <= 0 {
		t.Errorf("%.1f bytes per key", r.BytesPerKey)
	}
}

func TestMemoryConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*MemoryConfig)
		want   string
	}{
		{"no nodes", func(c *MemoryConfig) { c.Nodes = 0 }, "nodes: must be in [1, 256], got 0"},
		{"too many nodes", func(c *MemoryConfig) { c.Nodes = MaxMemoryNodes + 1 }, "nodes: "},
		{"no keys", func(c *MemoryConfig) { c.Keys = 0 }, "keys: "},
		{"too many keys", func(c *MemoryConfig) { c.Keys = maxMemoryKeys + 1 }, "keys: "},
		{"tiny heap", func(c *MemoryConfig) { c.MaxHeap = 1000 }, "max-heap: "},
		{"sync past window", func(c *MemoryConfig) { c.Sync = 2 * c.Window }, "sync: "},
		{"strict", func(c *MemoryConfig) { c.Sync = window.Strict }, "sync"},
		{"no window", func(c *MemoryConfig) { c.Window = 0 }, "rule-window: "},
		{"negative start", func(c *MemoryConfig) { c.Start = -1 }, "start: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := MemoryDefaults()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error starting %q", err, tt.want)
			}
			if _, err := Memory(context.Background(), c); err == nil {
				t.Errorf("Memory ran a config Validate rejects")
			}
		})
	}
	c := MemoryDefaults()
	if err := c.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// A cancelled context stops a run and says why.
func TestMemoryStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := MemoryDefaults()
	c.Keys = 100
	if _, err := Memory(ctx, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// The same config holds the same state: only the allocator can move the
// figure, and with a fixed start the sync traffic is identical.
func TestMemoryVirtualTimeIsFixed(t *testing.T) {
	c := MemoryDefaults()
	c.Keys, c.Start = 500, int64(1_900_000_000)*int64(time.Second)
	a, err := Memory(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Memory(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if a.Rounds != b.Rounds || a.Deltas != b.Deltas || a.EntriesDelivered != b.EntriesDelivered || a.Admitted != b.Admitted {
		t.Errorf("two runs differ: %+v and %+v", a, b)
	}
}
