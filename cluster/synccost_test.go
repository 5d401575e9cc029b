package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// With 10,000 keys changing every interval, a delta costs at most 32 bytes
// per entry: window as a one-byte offset. Under owner allocation each
// changed key is one entry, to its owner, or to its standby from the node
// that owns it.
func TestSyncBytesPerChangedKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	rule := window.Rule{Name: "api", Count: 1_000_000, Window: 10 * time.Second, SyncInterval: 100 * time.Millisecond}
	cl := startCluster(t, 3, []window.Rule{rule}, alignedClock(rule.Window))
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(100_000+i)
	}
	ctx := context.Background()
	n := cl[0]
	// Touch every key, let a round carry them, then measure the next rounds.
	touch := func() {
		for _, k := range keys {
			if _, err := n.Allow(ctx, rule.Name, k, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	touch()
	start := n.metrics.DeltasSent.Load()
	waitFor(t, patience, "a sync round", func() bool { return n.metrics.DeltasSent.Load() >= start+2 })
	bytes0, entries0 := n.metrics.BytesSent.Load(), n.metrics.EntriesSent.Load()
	for range 5 {
		touch()
		sent := n.metrics.DeltasSent.Load()
		waitFor(t, patience, "a sync round", func() bool { return n.metrics.DeltasSent.Load() >= sent+2 })
	}
	bytes, entries := n.metrics.BytesSent.Load()-bytes0, n.metrics.EntriesSent.Load()-entries0
	// A round may fall in the middle of a pass over the keys: the five
	// passes reach the peers in at least four rounds' worth of entries.
	if entries < int64(4*len(keys)) {
		t.Fatalf("sent %d entries for 5 rounds of %d changed keys", entries, len(keys))
	}
	perEntry := float64(bytes) / float64(entries)
	t.Logf("%d bytes for %d entries: %.1f bytes per entry", bytes, entries, perEntry)
	if perEntry > 32 {
		t.Errorf("%.1f bytes per entry, want ≤ 32", perEntry)
	}
}
