package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// Record is one check and its answer.
type Record struct {
	// Node answered the check; Boot is the incarnation of its run.
	Node string
	Boot uint64
	// Worker is the caller that made the check, unique in a Load.
	Worker    int
	Rule, Key string
	Hits      int64
	// Call and Ret are the switchboard's true time just before the check
	// and just after its answer; Deadline is the check's deadline.
	Call, Ret, Deadline int64
	// D is the answer in the counters' terms; D.At is when the node
	// decided it, in Unix nanoseconds on its own clock (for a strict
	// decision, the leader's).
	D   window.Decision
	Err error
	// Late says the answer came after the check's deadline had passed.
	Late bool
}

// decisionOf is a node's decision in the counters' terms, which the
// records and the models count in.
func decisionOf(d cluster.Decision) window.Decision {
	out := window.Decision{Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining, ResetAfter: d.ResetAfter,
		RetryAfter: d.RetryAfter, Path: d.Path}
	if at := d.At(); !at.IsZero() {
		out.At = at.UnixNano()
	}
	return out
}

// allow is nd.Allow with its decision as a record holds it.
func allow(ctx context.Context, nd *cluster.Node, rule, key string, hits int64) (window.Decision, error) {
	d, err := nd.Allow(ctx, rule, key, hits)
	return decisionOf(d), err
}

// Admitted reports whether the check was answered and admitted.
func (r Record) Admitted() bool { return r.Err == nil && r.D.Allowed }

// Traffic describes the checks a Load makes.
type Traffic struct {
	// Nodes receive the checks (default: every node of the fleet).
	Nodes []string
	// Rate is checks per second per node, spread over Workers callers per
	// node (default 1) that each wait for their answer.
	Rate    float64
	Workers int
	// Pick chooses each check's rule and key from the worker's seeded
	// source; every check costs one hit.
	Pick func(rng *rand.Rand) (rule, key string)
	// Timeout is each check's deadline (default 2 s).
	Timeout time.Duration
	// Seed seeds the workers' sources.
	Seed int64
}

// Load drives checks at a fleet until stopped and records every answer.
// Checks meant for a node that is down are skipped and counted.
type Load struct {
	f      *Fleet
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	records []Record
	skipped int
}

// Drive starts a load on the fleet.
func (f *Fleet) Drive(tr Traffic) *Load {
	if len(tr.Nodes) == 0 {
		tr.Nodes = f.Names()
	}
	if tr.Workers <= 0 {
		tr.Workers = 1
	}
	if tr.Timeout <= 0 {
		tr.Timeout = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{f: f, cancel: cancel}
	every := time.Duration(float64(time.Second) * float64(tr.Workers) / tr.Rate)
	for i, name := range tr.Nodes {
		for w := range tr.Workers {
			worker := i*tr.Workers + w
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.work(ctx, tr, name, worker, every)
			}()
		}
	}
	return l
}

// work makes one check every tick on the named node, waiting for each
// answer; ticks that pass while it waits are skipped.
func (l *Load) work(ctx context.Context, tr Traffic, name string, worker int, every time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(tr.Seed), uint64(worker)))
	// Workers start spread over one tick, not in step.
	if !sleepCtx(ctx, time.Duration(rng.Int64N(int64(every)+1))) {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		nd := l.f.Node(name)
		if nd == nil {
			l.mu.Lock()
			l.skipped++
			l.mu.Unlock()
			continue
		}
		rule, key := tr.Pick(rng)
		cctx, cancel := context.WithTimeout(context.Background(), tr.Timeout)
		rec := Record{Node: name, Boot: nd.Incarnation().Boot, Worker: worker, Rule: rule, Key: key, Hits: 1}
		rec.Call = l.f.Net.Now()
		rec.Deadline = rec.Call + int64(tr.Timeout)
		rec.D, rec.Err = allow(cctx, nd, rule, key, 1)
		rec.Ret = l.f.Net.Now()
		rec.Late = cctx.Err() != nil
		cancel()
		l.mu.Lock()
		l.records = append(l.records, rec)
		l.mu.Unlock()
	}
}

// Records returns the answers recorded so far, ordered by call.
func (l *Load) Records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]Record(nil), l.records...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Stop stops the load, waits for the checks in flight and returns every
// answer, ordered by call.
func (l *Load) Stop() []Record {
	l.cancel()
	l.wg.Wait()
	return l.Records()
}

// Skipped returns how many checks were skipped because their node was down.
func (l *Load) Skipped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.skipped
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// errorsOf returns the records that failed with an error other than those
// allowed.
func errorsOf(recs []Record, allowed ...error) []Record {
	var out []Record
	for _, r := range recs {
		if r.Err == nil {
			continue
		}
		ok := false
		for _, a := range allowed {
			if errors.Is(r.Err, a) {
				ok = true
			}
		}
		if !ok {
			out = append(out, r)
		}
	}
	return out
}
