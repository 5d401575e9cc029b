package strict

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stuckFuture is an Apply future Raft never answers, as one left in its
// buffered apply queue at shutdown; answered, when set, answers at once.
type stuckFuture struct{ answered chan error }

func (f stuckFuture) Error() error          { return <-f.answered }
func (f stuckFuture) Index() uint64         { return 0 }
func (f stuckFuture) Response() interface{} { return nil }

func TestAwaitApply(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		answer error // sent before waiting; nil: never answered
		down   bool  // Raft has shut down
		want   error
	}{
		{"answered", boom, false, boom},
		{"never answered, shut down", nil, true, raft.ErrRaftShutdown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &strictGroup{down: make(chan struct{})}
			f := stuckFuture{answered: make(chan error, 1)}
			if tc.answer != nil {
				f.answered <- tc.answer
			}
			got := make(chan error, 1)
			go func() { got <- g.awaitApply(f) }()
			if tc.down {
				g.downOnce.Do(func() { close(g.down) })
			}
			select {
			case err := <-got:
				if !errors.Is(err, tc.want) {
					t.Fatalf("awaitApply = %v, want %v", err, tc.want)
				}
			case <-time.After(time.Minute):
				t.Fatal("awaitApply still waiting a minute after Raft shut down")
			}
		})
	}
}
