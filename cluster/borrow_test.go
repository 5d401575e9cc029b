package cluster

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/counter"
)

// TestBorrowsWaitOnOneQuestion checks the bookkeeping of questions to keys'
// owners: checks on a key wait on the question in flight; its answer
// releases them; a question nobody waits on any longer (its time is up)
// gives way to a new one, though its asker went away early; a dropped
// question is forgotten only if it is still the one in flight.
func TestBorrowsWaitOnOneQuestion(t *testing.T) {
	var b borrows
	rk := ruleKey{"api", "user:1"}
	timeout := 250 * time.Millisecond
	ms := int64(time.Millisecond)
	answer := func(seq uint64) *counter.Delta {
		return &counter.Delta{Kind: counter.KindAnswer,
			Rules: []counter.RuleDelta{{Rule: rk.rule, Entries: []counter.Entry{{Key: rk.key, Told: seq}}}}}
	}
	closed := func(f *flight) bool {
		select {
		case <-f.done:
			return true
		default:
			return false
		}
	}

	f1, mine := b.start(rk, 10, 0, timeout)
	if !mine {
		t.Fatal("the first check on a key did not ask")
	}
	if f, mine := b.start(rk, 11, 100*ms, timeout); mine || f != f1 {
		t.Fatal("a second check asked while a question was in flight")
	}
	b.answered(answer(9))
	if closed(f1) {
		t.Fatal("an answer to an older report released the question's checks")
	}
	b.answered(answer(10))
	if !closed(f1) {
		t.Fatal("the answer did not release the question's checks")
	}

	// Its asker went away (say its context ended): the question stays in
	// flight for the others until its time is up, then a check asks anew.
	f2, _ := b.start(rk, 12, 300*ms, timeout)
	if f, mine := b.start(rk, 13, 549*ms, timeout); mine || f != f2 {
		t.Fatal("a question still waited on was replaced")
	}
	f3, mine := b.start(rk, 14, 550*ms, timeout)
	if !mine || f3 == f2 {
		t.Fatal("a question whose time was up was still waited on")
	}
	b.drop(rk, f2)
	if f, mine := b.start(rk, 15, 560*ms, timeout); mine || f != f3 {
		t.Fatal("dropping an old question dropped the one in flight")
	}
	b.drop(rk, f3)
	if _, mine := b.start(rk, 16, 570*ms, timeout); !mine {
		t.Fatal("a dropped question was still in flight")
	}
}
