package sim

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/counter"
)

// TestBorrowingWaitsAsANodeDoes checks the simulator's model of questions
// to an owner: checks give up in the order they began waiting, a timed-out
// asker marks the owner silent and drops its question, an answer wakes the
// checks of its question only, and, every owner answering gossip, an
// unanswered question is Late however long the owner was silent.
func TestBorrowingWaitsAsANodeDoes(t *testing.T) {
	owner := counter.Incarnation{Node: "n01", Boot: 1}
	ms := int64(time.Millisecond)
	answer := func(seq uint64) *counter.Delta { return answerFrom(owner, seq) }

	b := newBorrowing(250 * time.Millisecond)
	b.start(7, owner, 0)
	if !b.wait(0, true) || b.wait(0, false) || !b.wait(10*ms, false) {
		t.Fatal("wait should report a new deadline exactly when none was queued")
	}
	if got := b.giveUp(249 * ms); len(got) != 0 {
		t.Fatalf("gave up %d checks before any deadline", len(got))
	}
	if got := b.giveUp(250 * ms); len(got) != 2 || !got[0].asker {
		t.Fatalf("at the first deadline gave up %+v, want the asker and the check beside it", got)
	}
	if _, silent := b.silent[owner]; !silent || b.flight != 0 {
		t.Fatalf("a timed-out asker left silent=%v flight=%d, want silent and no flight", silent, b.flight)
	}
	if got := b.outcome(owner); got != counter.Late {
		t.Errorf("outcome with the owner silent and alive to gossip is %v, want Late", got)
	}
	// The check left waits on the dropped question: an answer to it wakes
	// nobody, and anything heard clears the silence.
	if got := b.answered(answer(7)); got != nil {
		t.Fatalf("an answer to a dropped question woke %+v", got)
	}
	b.heard(owner)
	if _, silent := b.silent[owner]; silent {
		t.Fatal("a delta from the owner left it silent")
	}
	// A new question: its answer wakes its own checks, in order, and not
	// the orphan of the old one.
	b.start(9, owner, 300*ms)
	b.wait(300*ms, true)
	b.wait(310*ms, false)
	if got := b.answered(answer(8)); got != nil {
		t.Fatalf("an answer to an older report woke %+v", got)
	}
	got := b.answered(answer(9))
	if len(got) != 2 || !got[0].asker || got[1].since != 310*ms {
		t.Fatalf("the answer woke %+v, want the asker then the check from 310 ms", got)
	}
	if len(b.waiting) != 1 || b.waiting[0].since != 10*ms {
		t.Fatalf("left waiting %+v, want only the orphan from 10 ms", b.waiting)
	}
}

// TestBorrowingBoundsEachWait checks that a check an answer leaves short
// waits on the next question until its own deadline, not a new one, while
// the check that asks that question gets a whole timeout for it.
func TestBorrowingBoundsEachWait(t *testing.T) {
	owner := counter.Incarnation{Node: "n01", Boot: 1}
	ms := int64(time.Millisecond)
	answer := func(seq uint64) *counter.Delta { return answerFrom(owner, seq) }
	b := newBorrowing(250 * time.Millisecond)
	b.start(1, owner, 0)
	b.wait(0, true)
	b.wait(20*ms, false)
	b.wait(40*ms, false)
	woken := b.answered(answer(1))
	if len(woken) != 3 {
		t.Fatalf("the answer woke %d checks, want 3", len(woken))
	}
	// The check from 20 ms asks again; the one from 40 ms waits on it.
	b.start(2, owner, 200*ms)
	if !b.rewait(woken[1], 200*ms, true) {
		t.Fatal("the new asker's deadline should be new to the queue")
	}
	b.rewait(woken[2], 200*ms, false)
	if got := b.giveUp(289 * ms); len(got) != 0 {
		t.Fatalf("gave up %+v before any deadline", got)
	}
	got := b.giveUp(290 * ms)
	if len(got) != 1 || got[0].since != 40*ms || got[0].asker {
		t.Fatalf("at 290 ms gave up %+v, want the check from 40 ms, 250 ms after it came", got)
	}
	if b.flight == 0 {
		t.Fatal("a waiter's deadline dropped the question it waits on")
	}
	got = b.giveUp(450 * ms)
	if len(got) != 1 || !got[0].asker || got[0].since != 20*ms {
		t.Fatalf("at 450 ms gave up %+v, want the asker from 20 ms, a timeout after it asked", got)
	}
	if _, silent := b.silent[owner]; !silent || b.flight != 0 {
		t.Fatal("an unanswered question did not mark its owner silent")
	}
}

// answerFrom is owner's answer to the report with sequence seq.
func answerFrom(owner counter.Incarnation, seq uint64) *counter.Delta {
	return &counter.Delta{From: owner, Kind: counter.KindAnswer,
		Rules: []counter.RuleDelta{{Rule: "sim", Entries: []counter.Entry{{Key: simKey, Told: seq}}}}}
}
