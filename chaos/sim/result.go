package sim

import (
	"math"
	"slices"
	"time"
)

// Result is what a run admitted, per window and per second.
type Result struct {
	// Windows are the whole windows of the run, aligned to the rule.
	Windows []WindowStat `json:"windows"`
	// Seconds are the run's whole seconds.
	Seconds []SecondStat `json:"seconds"`
	// AdmittedTotal and DemandTotal count requests over the whole run.
	AdmittedTotal int64 `json:"admitted_total"`
	DemandTotal   int64 `json:"demand_total"`
	// RefusedTotal is DemandTotal − AdmittedTotal.
	RefusedTotal int64 `json:"refused_total"`
	// FirstWindowErrorPct is the first window's error against the limit.
	FirstWindowErrorPct float64 `json:"first_window_error_pct"`
	// LaterWindowsErrorPct summarises the error of every window after the
	// first.
	LaterWindowsErrorPct Spread `json:"later_windows_error_pct"`
	// CumulativeErrorPct is (admitted − limit × windows) / (limit × windows)
	// over whole windows.
	CumulativeErrorPct float64 `json:"cumulative_error_pct"`
	// MaxWindowAdmitted is the most any whole window admitted.
	MaxWindowAdmitted int64 `json:"max_window_admitted"`
	// Deltas and Entries count the sync messages and entries sent.
	Deltas  int64 `json:"deltas_sent"`
	Entries int64 `json:"entries_sent"`
	// SyncBytes is the size of every sync message sent, encoded as the
	// nodes encode them on the wire (cluster.WireSize).
	SyncBytes int64 `json:"sync_bytes_total"`

	fine []int64 // admitted per fineStep, for shape checks
}

// fineStep is the resolution of Result.AdmittedIn.
const fineStep = 10 * time.Millisecond

// AdmittedIn returns how many requests were admitted in [from, to) of the
// run, to a resolution of 10 ms.
func (r *Result) AdmittedIn(from, to time.Duration) int64 {
	var n int64
	for i := from / fineStep; i < to/fineStep && int(i) < len(r.fine); i++ {
		n += r.fine[i]
	}
	return n
}

// WindowStat is one window's admissions.
type WindowStat struct {
	StartS   float64 `json:"start_s"`
	Admitted int64   `json:"admitted"`
	ErrorPct float64 `json:"error_pct"`
}

// SecondStat is one second's admissions, in total and per node.
type SecondStat struct {
	StartS   float64 `json:"start_s"`
	Admitted int64   `json:"admitted"`
	PerNode  []int64 `json:"per_node"`
}

// Spread is the minimum, median and maximum of a set of values.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Recorder tallies a run's decisions by window and by second into a Result.
// Not safe for concurrent use.
type Recorder struct {
	c        *Config
	start    int64
	windows  []int64
	seconds  [][]int64 // per second, per node
	fine     []int64
	admitted int64
	demand   int64
	deltas   int64
	entries  int64
	bytes    int64
}

// NewRecorder returns a recorder for scenario c run from start.
func NewRecorder(c *Config, start int64) *Recorder {
	whole := int(c.Duration / c.Window)
	if whole == 0 {
		whole = 1 // a run shorter than a window still reports its one window
	}
	secs := int((c.Duration + time.Second - 1) / time.Second)
	r := &Recorder{c: c, start: start, windows: make([]int64, whole), seconds: make([][]int64, secs),
		fine: make([]int64, (c.Duration+fineStep-1)/fineStep)}
	for i := range r.seconds {
		r.seconds[i] = make([]int64, c.Nodes)
	}
	return r
}

// Request records one decision at moment at on node of a check that
// arrived during the run. One decided after the run's end (it waited for
// its owner's answer) counts in the totals only; decisions before the
// start are ignored.
func (r *Recorder) Request(at int64, node int, allowed bool) {
	if at < r.start || node < 0 || node >= r.c.Nodes {
		return
	}
	r.demand++
	if allowed {
		r.admitted++
	}
	if !allowed || at >= r.start+int64(r.c.Duration) {
		return
	}
	if w := (at - r.start) / int64(r.c.Window); w < int64(len(r.windows)) {
		r.windows[w]++
	}
	r.seconds[(at-r.start)/int64(time.Second)][node]++
	r.fine[(at-r.start)/int64(fineStep)]++
}

// SyncTraffic adds sync messages and entries sent, for the Result.
func (r *Recorder) SyncTraffic(deltas, entries int64) {
	r.deltas += deltas
	r.entries += entries
}

// SyncBytes adds the encoded size of sync messages sent, for the Result.
func (r *Recorder) SyncBytes(bytes int64) { r.bytes += bytes }

// Result summarises what was recorded.
func (r *Recorder) Result() *Result {
	res := &Result{AdmittedTotal: r.admitted, DemandTotal: r.demand, RefusedTotal: r.demand - r.admitted,
		Deltas: r.deltas, Entries: r.entries, SyncBytes: r.bytes, fine: r.fine}
	limit := float64(r.c.Limit)
	var later []float64
	var sum int64
	for i, a := range r.windows {
		e := round3((float64(a) - limit) / limit * 100)
		res.Windows = append(res.Windows, WindowStat{StartS: round3(float64(i) * r.c.Window.Seconds()), Admitted: a, ErrorPct: e})
		res.MaxWindowAdmitted = max(res.MaxWindowAdmitted, a)
		sum += a
		if i > 0 {
			later = append(later, e)
		}
	}
	res.FirstWindowErrorPct = res.Windows[0].ErrorPct
	res.LaterWindowsErrorPct = spread(later)
	res.CumulativeErrorPct = round3((float64(sum) - limit*float64(len(r.windows))) / (limit * float64(len(r.windows))) * 100)
	for i, per := range r.seconds {
		var total int64
		for _, n := range per {
			total += n
		}
		res.Seconds = append(res.Seconds, SecondStat{StartS: float64(i), Admitted: total, PerNode: per})
	}
	return res
}

func spread(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return Spread{Min: s[0], Median: round3(median(s)), Max: s[len(s)-1]}
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// MedianAdmitted is the median of the whole windows' admitted counts.
func (r *Result) MedianAdmitted() float64 {
	v := make([]float64, len(r.Windows))
	for i, w := range r.Windows {
		v[i] = float64(w.Admitted)
	}
	slices.Sort(v)
	return median(v)
}
