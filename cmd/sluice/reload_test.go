package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// A reload (what SIGHUP triggers) takes the file's new rules; a file that no
// longer parses leaves the running rules alone.
func TestAgentReloadsRules(t *testing.T) {
	const before = `rules:
  - name: api
    count: 5
    time_window: 10
    sync_interval: 0.2
`
	path := writeFile(t, "sluice.yaml", before)
	a := startTestAgentArgs(t, nil, "--config", path, "--grpc-addr", "127.0.0.1:0")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	count := func() int64 { return a.node.Rules()[0].Count }

	tests := []struct {
		name string
		file string
		want int64
	}{
		{"new count", "rules:\n  - name: api\n    count: 7\n    time_window: 10\n    sync_interval: 0.2\n", 7},
		{"broken file", "rules:\n  - name: api\n    count: 0\n    time_window: 10\n    sync_interval: 0.2\n", 7},
		{"to strict", "rules:\n  - name: api\n    count: 9\n    time_window: 10\n    sync_interval: -1\n", 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			a.reload(context.Background(), path, log)
			if got := count(); got != tt.want {
				t.Fatalf("count after reload %d, want %d", got, tt.want)
			}
		})
	}
	// The strict group started by the reload elects itself and serves.
	waitUntil(t, patience, "a strict decision after the reload", func() (bool, string) {
		d, err := a.node.Allow(context.Background(), "api", "k", 0)
		switch {
		case errors.Is(err, cluster.ErrOutcomeUnknown):
			// The new group's first entry did not commit within the check's
			// deadline: it is still settling, so ask again.
		case err != nil:
			t.Fatal(err)
		}
		return err == nil && d.Path == window.PathStrict, fmt.Sprintf("%+v, %v", d, err)
	})
}
