package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/chaos/sim"
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

// Accuracy runs scenario c on a real cluster of c.Nodes nodes in this
// process, in wall-clock time, and reports what each window admitted as
// sim.Run does for the same scenario in virtual time.
//
// The cluster enforces the one rule c.Rule(). Its clock is shifted so that
// the run starts on a window boundary; the arrivals are sim.NewTraffic's for
// that start, each issued at its own time to its node, and each decision is
// recorded at the moment the node made it. The sync traffic is what the
// nodes' metrics count over the run.
//
// Some of the scenario is what the machine makes it, not what c says:
//   - Latency is loopback's (tens of microseconds, plus scheduling); a value
//     other than sim.Defaults().Latency is ignored with a logged notice.
//   - The nodes' sync phases follow from when each node started, not from
//     Seed; Seed still draws Poisson arrivals.
//   - A strict scenario (Sync == window.Strict) runs the rule through the
//     cluster's Raft group: every check goes to the leader.
//
// When ctx ends the run early, Accuracy returns what it measured and a
// *StoppedError saying how much that is.
func Accuracy(ctx context.Context, c sim.Config, opts Options) (*sim.Result, error) {
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
	cl, err := StartCluster(ctx, c.Nodes, []window.Rule{c.Rule()}, opts.NodeLogger)
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
	log     []uint64 // per decision: (offset from start) << 1 | allowed
	late    int64    // decisions made more than lateAfter after the arrival
	maxLate time.Duration
	err     error
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

func runAccuracy(ctx context.Context, cl *Cluster, c sim.Config, live func(sim.SecondStat), log *slog.Logger) (*sim.Result, error) {
	// Lead one sync interval so every node has had a round on the shifted
	// clock when traffic starts.
	start := cl.AlignNext(c.Window, c.Sync+50*time.Millisecond)
	r := &accuracyRun{cl: cl, c: c, rule: c.Rule().Name, start: start, end: start + int64(c.Duration),
		seconds: int((c.Duration + time.Second - 1) / time.Second)}
	r.perSecond = make([]atomic.Int64, c.Nodes*r.seconds)
	deltas0, entries0 := r.syncTraffic()

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
	for _, f := range feeds {
		close(f)
	}
	wg.Wait()
	close(marks)
	<-collected
	deltas1, entries1 := r.syncTraffic()

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
	rec := sim.NewRecorder(&cc, start)
	for node, w := range workers {
		for _, d := range w.log {
			rec.Request(start+int64(d>>1), node, d&1 == 1)
		}
	}
	rec.SyncTraffic(deltas1-deltas0, entries1-entries0)
	res := rec.Result()
	if !completed {
		return res, &StoppedError{Measured: measured, Err: context.Cause(ctx)}
	}
	return res, nil
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
		t := r.cl.Now()
		d, err := nd.Allow(ctx, r.rule, benchKey, 1)
		if err != nil {
			w.err = err
			stop()
			continue
		}
		if late := time.Duration(t - it.at); late > lateAfter {
			w.late++
			w.maxLate = max(w.maxLate, late)
		}
		// A decision counts in the window it was made in: a strict check
		// asked for just before a boundary may be decided after it, by the
		// leader, against the next window's budget.
		if d.At != 0 {
			t = max(t, d.At)
		}
		// A request that arrived in the run but is decided just after it
		// still belongs to it: count it in the run's last moment.
		t = min(t, r.end-1)
		var allowed uint64
		if d.Allowed {
			allowed = 1
			r.perSecond[node*r.seconds+int((t-r.start)/int64(time.Second))].Add(1)
		}
		w.log = append(w.log, uint64(t-r.start)<<1|allowed)
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
func (r *accuracyRun) syncTraffic() (deltas, entries int64) {
	for _, nd := range r.cl.Nodes {
		m := nd.Metrics()
		deltas += m.DeltasSent.Load()
		entries += m.EntriesSent.Load()
	}
	return deltas, entries
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
