package cluster

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/counter"
)

// gossiped is a member as memberlist tells of it, with the boot and rules
// hash its metadata gives.
func gossiped(t *testing.T, name string, boot, rules uint64) *memberlist.Node {
	t.Helper()
	meta, err := nodeMeta{grpcAddr: "127.0.0.1:1", boot: boot, rulesHash: rules}.encode()
	if err != nil {
		t.Fatal(err)
	}
	return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: meta}
}

// TestSender: whom a node takes sync deltas from, as its gossip sees the
// fleet.
func TestSender(t *testing.T) {
	m := &membership{n: &Node{}, known: map[string]memberCopy{}, grew: make(chan struct{}), reconnect: newReconnector()}
	m.n.hash.Store(1)
	m.remember(gossiped(t, "same", 5, 1))
	m.remember(gossiped(t, "drifted", 6, 2))
	m.remember(gossiped(t, "left", 7, 1))
	now := time.Now()
	m.forget(&memberlist.Node{Name: "left", Meta: m.known["left"].meta})
	m.reconnect.lost("long-gone", "127.0.0.1:7946", m.known["same"].meta, now.Add(-2*departedGrace))
	tests := []struct {
		name          string
		inc           counter.Incarnation
		ok, otherRule bool
	}{
		{"a member", counter.Incarnation{Node: "same", Boot: 5}, true, false},
		{"a member with other rules", counter.Incarnation{Node: "drifted", Boot: 6}, true, true},
		{"another boot of a member", counter.Incarnation{Node: "same", Boot: 4}, false, false},
		{"a member that has just left", counter.Incarnation{Node: "left", Boot: 7}, true, false},
		{"another boot of one that has just left", counter.Incarnation{Node: "left", Boot: 8}, false, false},
		{"a member that left long ago", counter.Incarnation{Node: "long-gone", Boot: 5}, false, false},
		{"no member", counter.Incarnation{Node: "mallory", Boot: 5}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, other := m.sender(tt.inc, now)
			if ok != tt.ok || other != tt.otherRule {
				t.Errorf("sender(%v) = %v, %v; want %v, %v", tt.inc, ok, other, tt.ok, tt.otherRule)
			}
		})
	}
	if ok, _ := m.sender(counter.Incarnation{Node: "left", Boot: 7}, now.Add(2*departedGrace)); ok {
		t.Error("a member that left is taken from after departedGrace")
	}
}

// TestAwaitSender: a delta from an incarnation gossip does not list waits
// for gossip to tell of it, and no longer than it is given.
func TestAwaitSender(t *testing.T) {
	m := &membership{n: &Node{}, known: map[string]memberCopy{}, grew: make(chan struct{}), reconnect: newReconnector()}
	joining := counter.Incarnation{Node: "joining", Boot: 3}
	done := make(chan bool, 1)
	go func() {
		ok, _ := m.awaitSender(context.Background(), joining, patience)
		done <- ok
	}()
	// Another member, and the joining one's earlier boot, wake the wait
	// and do not end it.
	m.remember(gossiped(t, "other", 1, 0))
	m.remember(gossiped(t, "joining", 2, 0))
	select {
	case ok := <-done:
		t.Fatalf("the wait ended (%v) before gossip told of the sender", ok)
	default:
	}
	m.remember(gossiped(t, "joining", 3, 0))
	if ok := <-done; !ok {
		t.Fatal("the wait ended without the sender gossip told of")
	}

	start := time.Now()
	if ok, _ := m.awaitSender(context.Background(), counter.Incarnation{Node: "never", Boot: 1}, 10*time.Millisecond); ok {
		t.Fatal("an incarnation gossip never told of is taken")
	}
	if waited := time.Since(start); waited > patience {
		t.Fatalf("a wait of 10 ms took %v", waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, _ := m.awaitSender(ctx, counter.Incarnation{Node: "never", Boot: 1}, patience); ok {
		t.Fatal("an ended wait took an incarnation gossip never told of")
	}
}
