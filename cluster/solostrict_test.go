package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/strict"
	"github.com/sluicehq/sluice/window"
)

// startSoloStrict starts a node alone with rules, in strict mode, its
// clock standing still (so that no window passes while a test waits) and
// a strict timeout long enough that no check is answered by its fail mode;
// the node is closed when the test ends.
func startSoloStrict(t *testing.T, rules ...window.Rule) *cluster.Node {
	t.Helper()
	at := time.Date(2030, 1, 1, 12, 30, 0, 0, time.UTC)
	nd, err := cluster.Start(context.Background(), cluster.Config{Name: "solo", Rules: rules,
		Strict: strict.Mode{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return at }, StrictTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}
