package strict

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// syncBuffer is a log sink safe for the node's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBootstrapOverExistingGroup tries to bootstrap a strict group whose log
// already holds one, as a restarted node does while it finds no leader: it
// must not claim to have bootstrapped, and must stop trying.
func TestBootstrapOverExistingGroup(t *testing.T) {
	var logs syncBuffer
	rules := []window.Rule{{Name: "s", Count: 5, Window: time.Hour, Type: window.Fixed, SyncInterval: window.Strict}}
	nd, err := start(cluster.Config{Name: "solo", Rules: rules,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	g := nd.group()
	before := strings.Count(logs.String(), "strict group bootstrapped")
	for range 3 {
		g.bootstrap()
	}
	if got := strings.Count(logs.String(), "strict group bootstrapped") - before; got != 0 {
		t.Errorf("bootstrapping over an existing group logged %d bootstraps, want none", got)
	}
	if !g.hasGroup.Load() {
		t.Errorf("after a refused bootstrap the group does not know its log holds one: it would try again every tick")
	}
}
