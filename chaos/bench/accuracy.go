package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/chaos/sim"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// benchKey is the one key every request of a run is for, as in the
// simulator. Each run starts its own cluster, so the key is always fresh.
const benchKey = "k"

// lateAfter is how long after its arrival time a request may be decided
// before it counts as late in the pacing report. Go's timers wake up to
// about a millisecond late on Linux, so every run has some lateness below
// this.
const lateAfter = 5 * time.Millisecond

// Options tune an accuracy run. The zero value is a quiet run.
type Options struct {
	// Logger receives the bench's notices: an ignored field, pacing that
	// fell behind, a node that failed to close. Nil discards them.
	Logger *slog.Logger
	// NodeLogger receives the nodes' own logs; nil discards them. Nodes
	// shutting down together log a few harmless gossip errors.
	NodeLogger *slog.Logger
	// Live, if set, is called once per second of the run, in order, with
	// what each node admitted in that second (StartS is the second's offset
	// from the start of the run). It is called from one goroutine while the
	// run goes on and must return promptly.
	Live func(sim.SecondStat)
	// StrictTimeout is the nodes' cluster.Config.StrictTimeout: how long a
	// strict check waits for the log before its rule's fail_mode answers.
	// Zero keeps the node's default. A run that must measure the log alone,
	// however slow the machine, sets it long.
	StrictTimeout time.Duration
}

// AccuracyResult is what an accuracy run measured: the simulator's figures
// (sim.Result, whose JSON fields it carries unchanged) plus what only a
// wall-clock run has.
//
// Every request arrives during the run, but a real node may decide it
// later: a backlog of checks still queued when the run ends (a strict check
// waits for the Raft log, and a loaded machine delays every check). A
// decision counts in the window of the moment it was made, on the clock
// that made it (cluster.Decision.At), as the node counted it; one made after
// the run's end belongs to a window the run does not report, and one
// stamped before the run's start (a deciding clock behind the bench's) to
// one before it. Windows and Seconds hold neither kind; DecidedAfterEnd and
// DecidedBeforeStart say how many there were. DemandTotal, AdmittedTotal
// and RefusedTotal count every request that arrived during the run, as the
// simulator's do.
type AccuracyResult struct {
	*sim.Result
	// DecidedAfterEnd are requests that arrived during the run and were
	// decided after its end.
	DecidedAfterEnd OutsideRun `json:"decided_after_end"`
	// DecidedBeforeStart are requests that arrived during the run and were
	// decided, by the deciding node's clock, before its start.
	DecidedBeforeStart OutsideRun `json:"decided_before_start"`
	// ByPath counts decisions by what made them (window.Path names: local,
	// strict, fail-open, fail-closed, fail-local): a strict run whose
	// checks fail over is not measuring the log.
	ByPath map[string]int64 `json:"by_path"`
	// OutcomeUnknown are strict checks whose outcome the node could not
	// tell (cluster.ErrOutcomeUnknown: the log's leader changed while the
	// check was on its way); the log may have admitted them. They count in
	// DemandTotal and in no window.
	OutcomeUnknown int64 `json:"outcome_unknown"`
}

// OutsideRun counts decisions made outside the run's span.
type OutsideRun struct {
	// Decided is how many there were, and Admitted how many of them were
	// allowed.
	Decided  int64 `json:"decided"`
	Admitted int64 `json:"admitted"`
	// FurthestS is how far outside the span, in seconds, the furthest of
	// them was made.
	FurthestS float64 `json:"furthest_s"`
}

func (o *OutsideRun) add(allowed bool, by time.Duration) {
	o.Decided++
	if allowed {
		o.Admitted++
	}
	o.FurthestS = max(o.FurthestS, by.Seconds())
}

// StoppedError is returned, with a partial result, when ctx ends a run
// before its duration.
type StoppedError struct {
	// Measured is the stretch the partial result covers: whole windows when
	// at least one window finished, whole seconds otherwise; zero when
	// nothing was measured, and then there is no result.
	Measured time.Duration
	// Err is why the run stopped: ctx's error.
	Err error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped after measuring %v: %v", e.Measured, e.Err)
}

// Unwrap returns ctx's error.
func (e *StoppedError) Unwrap() error { return e.Err }

// Accuracy is MeasureAccuracy's sim.Result alone: what each window admitted,
// laid out as sim.Run reports the same scenario in virtual time.
func Accuracy(ctx context.Context, c sim.Config, opts Options) (*sim.Result, error) {
	res, err := MeasureAccuracy(ctx, c, opts)
	if res == nil {
		return nil, err
	}
	return res.Result, err
}

// MeasureAccuracy runs scenario c on a real cluster of c.Nodes nodes in this
// process, in wall-clock time, and reports what each window admitted as
// sim.Run does for the same scenario in virtual time, and which decisions
// fell outside the run.
//
// The cluster enforces the one rule c.Rule(). Its clock is shifted so that
// the run starts on a window boundary; the arrivals are sim.NewTraffic's for
// that start, each issued at its own time to its node, and each decision is
// recorded at the moment the node made it (its At). The sync traffic is
// what the nodes' metrics count over the run.
//
// Some of the scenario is what the machine makes it, not what c says:
//   - Latency is loopback's (tens of microseconds, plus scheduling); a value
//     other than sim.Defaults().Latency is ignored with a logged notice.
//   - The nodes' sync phases follow from when each node started, not from
//     Seed; Seed still draws Poisson arrivals.
//   - A strict scenario (Sync == window.Strict) runs the rule through the
//     cluster's Raft group: every check goes to the leader. Traffic starts
//     once every node decides through the log.
//
// When ctx ends the run early, MeasureAccuracy returns what it measured and
// a *StoppedError saying how much that is.
func MeasureAccuracy(ctx context.Context, c sim.Config, opts Options) (*AccuracyResult, error) {
	if err := c.ValidateWallClock(); err != nil {
		return nil, err
	}
	if c.Nodes > MaxNodes {
		return nil, fmt.Errorf("nodes must be in [1, %d] for an in-process cluster, got %d", MaxNodes, c.Nodes)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if d := sim.Defaults().Latency; c.Latency != d {
		log.Warn("latency is ignored by a real cluster: its nodes talk over loopback", "latency", c.Latency)
	}
	rule := c.Rule()
	cl, err := startCluster(ctx, c.Nodes, []window.Rule{rule}, opts.NodeLogger, func(cfg *cluster.Config) {
		cfg.StrictTimeout = opts.StrictTimeout
	})
	if err == nil && rule.IsStrict() {
		// Until the group has its leader and the log its rule, a strict
		// check is answered by the rule's fail_mode: not what a strict run
		// measures.
		if err = waitStrictReady(ctx, cl, rule.Name); err != nil {
			err = errors.Join(err, cl.Close())
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, &StoppedError{Err: context.Cause(ctx)}
		}
		return nil, err
	}
	res, runErr := runAccuracy(ctx, cl, c, opts.Live, log)
	if err := cl.Close(); err != nil {
		log.Warn("closing the bench cluster", "err", err)
	}
	return res, runErr
}

// item is what a node's worker gets: a request arriving at at, or, with
// second ≥ 0, the mark that every arrival of that second was handed over.
type item struct {
	at     int64
	second int
}

// worker decides one node's requests in arrival order and keeps what they
// were; only its own goroutine writes to it until the run is over.
type worker struct {
	log     []decided
	late    int64 // decisions made more than lateAfter after the arrival
	maxLate time.Duration
	err     error
}

// decided is one request: when it arrived and when, by the deciding clock,
// it was decided (Unix nanoseconds), whether it was allowed, and by what.
type decided struct {
	arrived, at int64
	allowed     bool
	path        window.Path
	unknown     bool // a strict check whose outcome the node could not tell
}

// accuracyRun is one run's shared, read-mostly state.
type accuracyRun struct {
	cl      *Cluster
	c       sim.Config
	rule    string
	start   int64
	end     int64
	seconds int
	// perSecond[node*seconds+s] counts what node admitted in second s.
	perSecond []atomic.Int64
}

func runAccuracy(ctx context.Context, cl *Cluster, c sim.Config, live func(sim.SecondStat), log *slog.Logger) (*AccuracyResult, error) {
	// Lead one sync interval so every node has had a round on the shifted
	// clock when traffic starts.
	start := cl.AlignNext(c.Window, c.Sync+50*time.Millisecond)
	r := &accuracyRun{cl: cl, c: c, rule: c.Rule().Name, start: start, end: start + int64(c.Duration),
		seconds: int((c.Duration + time.Second - 1) / time.Second)}
	r.perSecond = make([]atomic.Int64, c.Nodes*r.seconds)
	deltas0, entries0, bytes0 := r.syncTraffic()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	feeds := make([]chan item, c.Nodes)
	workers := make([]*worker, c.Nodes)
	marks := make(chan int, 8*c.Nodes)
	var wg sync.WaitGroup
	for i := range feeds {
		feeds[i] = make(chan item, 1024)
		workers[i] = &worker{}
		wg.Go(func() { r.work(runCtx, cancel, i, feeds[i], marks, workers[i]) })
	}
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		r.collect(marks, live)
	}()

	completed := r.schedule(runCtx, feeds)
	stoppedAt := min(cl.Now(), r.end)
	// The run ends when its backlog is decided: every request handed over
	// is decided and recorded, however late.
	for _, f := range feeds {
		close(f)
	}
	wg.Wait()
	close(marks)
	<-collected
	deltas1, entries1, bytes1 := r.syncTraffic()

	for i, w := range workers {
		if w.err != nil {
			return nil, fmt.Errorf("node n%d: %w", i, w.err)
		}
	}
	r.reportPacing(workers, log)

	measured := c.Duration
	if !completed {
		ran := time.Duration(stoppedAt - start)
		measured = ran.Truncate(c.Window)
		if measured == 0 {
			measured = ran.Truncate(time.Second)
		}
		if measured <= 0 {
			return nil, &StoppedError{Err: context.Cause(ctx)}
		}
	}
	cc := c
	cc.Duration = measured
	res := tally(&cc, start, workers)
	res.SyncTraffic(deltas1-deltas0, entries1-entries0)
	res.SyncBytes(bytes1 - bytes0)
	out := res.result()
	if !completed {
		return out, &StoppedError{Measured: measured, Err: context.Cause(ctx)}
	}
	return out, nil
}

// tallied is a run's decisions sorted into the measured span and outside it.
type tallied struct {
	*sim.Recorder
	after, before OutsideRun
	byPath        map[string]int64
	unknown       int64
}

// tally records the decisions of every request that arrived in the
// measured span [start, start + c.Duration), each at the moment it was
// decided: in the span's windows and seconds, or as decided after its end
// or before its start. Requests that arrived after the span (a stopped
// run's last ones) are not part of it.
func tally(c *sim.Config, start int64, workers []*worker) *tallied {
	end := start + int64(c.Duration)
	t := &tallied{Recorder: sim.NewRecorder(c, start), byPath: map[string]int64{}}
	for node, w := range workers {
		for _, d := range w.log {
			if d.arrived < start || d.arrived >= end {
				continue
			}
			if d.unknown {
				t.unknown++
				continue
			}
			t.byPath[d.path.String()]++
			switch {
			case d.at >= end:
				t.after.add(d.allowed, time.Duration(d.at-end))
			case d.at < start:
				t.before.add(d.allowed, time.Duration(start-d.at))
			default:
				t.Request(d.at, node, d.allowed)
			}
		}
	}
	return t
}

// result is the AccuracyResult: the recorder's, with the decisions made
// outside the span added to the totals (they arrived in it).
func (t *tallied) result() *AccuracyResult {
	res := &AccuracyResult{Result: t.Recorder.Result(), DecidedAfterEnd: t.after, DecidedBeforeStart: t.before, ByPath: t.byPath,
		OutcomeUnknown: t.unknown}
	res.DemandTotal += t.after.Decided + t.before.Decided + t.unknown
	res.AdmittedTotal += t.after.Admitted + t.before.Admitted
	res.RefusedTotal = res.DemandTotal - res.AdmittedTotal
	return res
}

// schedule hands every arrival to its node's worker at the arrival's time,
// and after each second a mark to every worker. It reports whether the run
// went to its end; it returns early when ctx ends.
func (r *accuracyRun) schedule(ctx context.Context, feeds []chan item) bool {
	src := sim.NewTraffic(&r.c, r.start)
	at, node, ok := src.Next()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	send := func(f chan item, it item) bool {
		select {
		case f <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for second := 0; second < r.seconds; {
		markAt := min(r.start+int64(second+1)*int64(time.Second), r.end)
		mark := !ok || at >= markAt
		due := at
		if mark {
			due = markAt
		}
		if wait := time.Duration(due - r.cl.Now()); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return false
			case <-timer.C:
			}
			continue
		}
		if mark {
			for _, f := range feeds {
				if !send(f, item{second: second}) {
					return false
				}
			}
			second++
			continue
		}
		if !send(feeds[node], item{at: at, second: -1}) {
			return false
		}
		at, node, ok = src.Next()
	}
	return true
}

// work decides node's requests as they come, until feed is closed. It
// drains feed even after ctx ends, so that every request handed over before
// the run stopped is decided and counted; a failed decision stops the run.
func (r *accuracyRun) work(ctx context.Context, stop context.CancelFunc, node int, feed <-chan item, marks chan<- int, w *worker) {
	nd := r.cl.Nodes[node]
	// Decisions outlive the run's context: a request handed over before the
	// stop is decided, not refused by it. Each is still bounded, by the
	// node's borrow and strict timeouts.
	decideCtx := context.WithoutCancel(ctx)
	for it := range feed {
		if it.second >= 0 {
			select {
			case marks <- it.second:
			case <-ctx.Done(): // stopped: nobody waits for the second
			}
			continue
		}
		if w.err != nil {
			continue
		}
		asked := r.cl.Now()
		d, err := nd.Allow(decideCtx, r.rule, benchKey, 1)
		if errors.Is(err, cluster.ErrOutcomeUnknown) {
			// Not a failure of the run: the log's leader changed under the
			// check, as a loaded machine makes it do. Counted apart.
			w.log = append(w.log, decided{arrived: it.at, at: r.cl.Now(), unknown: true})
			continue
		}
		if err != nil {
			w.err = err
			stop()
			continue
		}
		if late := time.Duration(asked - it.at); late > lateAfter {
			w.late++
			w.maxLate = max(w.maxLate, late)
		}
		// A decision counts in the window it was made in, as the node
		// counted it: a strict check asked for just before a boundary may
		// be decided after it, by the leader, against the next window's
		// budget; one decided after the run's end is in none of its
		// windows.
		at := asked // unless the deciding clock says: when it was asked
		if t := d.At(); !t.IsZero() {
			at = t.UnixNano()
		}
		w.log = append(w.log, decided{arrived: it.at, at: at, allowed: d.Allowed, path: d.Path})
		if d.Allowed && at >= r.start && at < r.end {
			r.perSecond[node*r.seconds+int((at-r.start)/int64(time.Second))].Add(1)
		}
	}
}

// collect calls live for each second once every worker has passed its mark,
// until marks is closed.
func (r *accuracyRun) collect(marks <-chan int, live func(sim.SecondStat)) {
	seen := make([]int, r.seconds)
	for s := range marks {
		seen[s]++
		if seen[s] < r.c.Nodes || live == nil {
			continue
		}
		st := sim.SecondStat{StartS: float64(s), PerNode: make([]int64, r.c.Nodes)}
		for node := range st.PerNode {
			st.PerNode[node] = r.perSecond[node*r.seconds+s].Load()
			st.Admitted += st.PerNode[node]
		}
		live(st)
	}
}

// syncTraffic sums the delta messages and entries the nodes have sent.
func (r *accuracyRun) syncTraffic() (deltas, entries, bytes int64) {
	for _, nd := range r.cl.Nodes {
		m := nd.Metrics()
		deltas += m.DeltasSent
		entries += m.EntriesSent
		bytes += m.BytesSent
	}
	return deltas, entries, bytes
}

// reportPacing warns when requests were decided late enough, often enough,
// to move the figures.
func (r *accuracyRun) reportPacing(workers []*worker, log *slog.Logger) {
	var total, late int64
	var worst time.Duration
	for _, w := range workers {
		total += int64(len(w.log))
		late += w.late
		worst = max(worst, w.maxLate)
	}
	if total == 0 {
		return
	}
	level := slog.LevelDebug
	if late*100 > total {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "bench pacing: requests decided late after their arrival time",
		"late_after", lateAfter, "late", late, "of", total, "worst", worst)
}
