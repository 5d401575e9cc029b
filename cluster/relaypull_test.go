package cluster

import (
	"testing"
	"time"
)

// TestRelayPullsBegin: one pull of a member's state at a time, whose end a
// second delta waits for, and none again within relayPullEvery of the last.
func TestRelayPullsBegin(t *testing.T) {
	var r relayPulls
	now := time.Now()
	first, mine := r.begin("m", now)
	if !mine || first == nil {
		t.Fatal("the first pull of m's state is not made")
	}
	if p, mine := r.begin("m", now); mine || p != first {
		t.Fatalf("a delta during the pull: %v, mine %v; want to wait for the pull under way", p, mine)
	}
	if _, mine := r.begin("other", now); !mine {
		t.Fatal("a pull of another member's state waits on m's")
	}
	close(first.done)
	if p, mine := r.begin("m", now.Add(relayPullEvery/2)); mine || p != nil {
		t.Fatalf("a delta soon after the pull: %v, mine %v; want no pull and nothing to wait for", p, mine)
	}
	if p, mine := r.begin("m", now.Add(relayPullEvery)); !mine || p == first {
		t.Fatalf("a delta relayPullEvery after the pull: %v, mine %v; want a new pull", p, mine)
	}
}
