package cluster

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// BenchmarkLoneStrictStart measures how long a node without a cluster takes
// from Start to its first decision through its own strict log; until then
// its strict rules answer by their fail mode.
func BenchmarkLoneStrictStart(b *testing.B) {
	rules := []window.Rule{{Name: "s", Count: 10, Window: time.Second, SyncInterval: window.Strict}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for b.Loop() {
		n, err := Start(context.Background(), Config{Rules: rules, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		for {
			d, err := n.Allow(context.Background(), "s", "k", 0)
			if err != nil {
				b.Fatal(err)
			}
			if d.Path == window.PathStrict {
				break
			}
			time.Sleep(time.Millisecond) // polling for the first strict answer
		}
		b.StopTimer()
		n.Close()
		b.StartTimer()
	}
}
