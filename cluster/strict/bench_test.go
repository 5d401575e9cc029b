package strict

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// BenchmarkLoneStrictStart measures how long a node without a cluster takes
// from Start to its first decision through its own strict log; until then
// its strict rules answer by their fail mode.
func BenchmarkLoneStrictStart(b *testing.B) {
	rules := []window.Rule{{Name: "s", Count: 10, Window: time.Second, SyncInterval: window.Strict}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for b.Loop() {
		n, err := start(cluster.Config{Rules: rules, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			d, err := n.Allow(context.Background(), "s", "k", 0)
			if err != nil {
				b.Fatal(err)
			}
			if d.Path == window.PathStrict {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("no strict decision 10 s after Start: %+v", d)
			}
			time.Sleep(time.Millisecond) // polling a condition with a deadline
		}
		b.StopTimer()
		n.Close()
		b.StartTimer()
	}
}
