package strict

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// strictPending is checks waiting for their decisions together: one check
// of this node's, or a batch a follower forwarded, which then goes into one
// log entry whole.
type strictPending struct {
	checks []*sluicev1.StrictCheck
	done   chan strictOutcome // buffered: the decider never blocks
	// state is pendingQueued until a batch takes it; a caller whose
	// deadline passes first withdraws it, and then it is known unsent.
	state atomic.Int32
}

const (
	pendingQueued int32 = iota
	pendingTaken
	pendingWithdrawn
)

// take claims p for a batch; false if its caller has withdrawn it.
func (p *strictPending) take() bool { return p.state.CompareAndSwap(pendingQueued, pendingTaken) }

// withdraw takes p back before any batch took it; false if one did.
func (p *strictPending) withdraw() bool {
	return p.state.CompareAndSwap(pendingQueued, pendingWithdrawn)
}

// strictOutcome is a decision per check, or why there are none.
type strictOutcome struct {
	ds  []*sluicev1.StrictDecision
	err error
}

// batchLoop packs the checks that arrive while earlier entries are in
// flight into the next log entry: group commit.
func (g *strictGroup) batchLoop(ctx context.Context) { pump(ctx, g.lead, g.commit) }

// pump hands the checks queued on q to send in batches: whatever has queued
// by the time one of strictInFlight sends is free goes in the next one. When
// ctx ends it answers what is still queued as never appended.
func pump(ctx context.Context, q chan *strictPending, send func([]*strictPending)) {
	slots := make(chan struct{}, strictInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		for {
			select {
			case p := <-q:
				if p.take() {
					p.done <- strictOutcome{err: errNoLeader}
				}
			default:
				return
			}
		}
	}()
	for {
		var first *strictPending
		select {
		case <-ctx.Done():
			return
		case first = <-q:
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			if first.take() {
				first.done <- strictOutcome{err: errNoLeader}
			}
			return
		}
		if !first.take() {
			<-slots // withdrawn by its caller
			continue
		}
		batch := drain(first, q)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			send(batch)
		}()
	}
}

// drain takes first and whatever else is already queued, up to a batch of
// checks (a forwarded batch is never split).
func drain(first *strictPending, q chan *strictPending) []*strictPending {
	batch, n := []*strictPending{first}, len(first.checks)
	for n < strictMaxBatch {
		select {
		case p := <-q:
			if p.take() {
				batch, n = append(batch, p), n+len(p.checks)
			}
		default:
			return batch
		}
	}
	return batch
}

// checksOf lists the checks of a batch, in order. A pending's last check
// is joined to none after it: a run of checks decided all or nothing
// (with_next) never reaches into another caller's checks, whatever a
// forwarding node sent.
func checksOf(batch []*strictPending) []*sluicev1.StrictCheck {
	var out []*sluicev1.StrictCheck
	for _, p := range batch {
		if n := len(p.checks); n > 0 && p.checks[n-1].GetWithNext() {
			p.checks[n-1].WithNext = false
		}
		out = append(out, p.checks...)
	}
	return out
}

// answer hands each pending its share of decisions, which are in the order
// of checksOf(batch).
func answer(batch []*strictPending, ds []*sluicev1.StrictDecision) {
	for _, p := range batch {
		p.done <- strictOutcome{ds: ds[:len(p.checks):len(p.checks)]}
		ds = ds[len(p.checks):]
	}
}

// commit appends one entry and hands each check its decision.
func (g *strictGroup) commit(batch []*strictPending) {
	checks := checksOf(batch)
	data, err := proto.Marshal(&sluicev1.StrictBatch{Now: g.e.h.Now(), Checks: checks})
	if err != nil {
		failAll(batch, err)
		return
	}
	start := time.Now()
	f := g.raft.Apply(data, 0)
	err = g.awaitApply(f)
	if err == nil {
		g.e.c.StrictApply.Observe(int64(time.Since(start)))
	}
	if err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			failAll(batch, errNoLeader) // refused before it was appended
		default:
			failAll(batch, fmt.Errorf("%w: %w", strictapi.ErrOutcomeUnknown, err))
		}
		return
	}
	res, ok := f.Response().(*strictResult)
	if !ok || res.err != nil || len(res.decisions) != len(checks) {
		failAll(batch, fmt.Errorf("sluice: strict entry %d was not decided", f.Index()))
		return
	}
	g.e.c.StrictEntries.Add(1)
	g.e.c.StrictChecks.Add(int64(len(checks)))
	answer(batch, res.decisions)
}

func failAll(batch []*strictPending, err error) {
	for _, p := range batch {
		p.done <- strictOutcome{err: err}
	}
}
