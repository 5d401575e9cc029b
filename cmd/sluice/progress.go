package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progressFloor is how long a run must be expected to take before it
// shows progress.
const progressFloor = 10 * time.Second

// showProgress writes, once a second, how far a run of about total has got
// to w, on one line that it rewrites, when w is a terminal, quiet is false
// and total is at least progressFloor; the returned stop ends it and clears
// the line. Anywhere else (a pipe, a file, --json) it writes nothing, so
// that what a script reads is the result alone.
func showProgress(w io.Writer, label string, total time.Duration, quiet bool) (stop func()) {
	if quiet || total < progressFloor || !isTerminal(w) {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-tick.C:
				el := time.Since(start).Truncate(time.Second)
				fmt.Fprintf(w, "\r\033[K%s: %v of %v", label, el, total.Truncate(time.Second))
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// isTerminal reports whether w is a character device, as a terminal is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// simProgress returns a sim.Config.Progress that, once the simulation has
// run progressFloor of wall time, shows how much of its virtual time is
// done, on w when w is a terminal and quiet is false; and a stop that
// clears the line. A short simulation shows nothing.
func simProgress(w io.Writer, quiet bool) (progress func(done, total time.Duration), stop func()) {
	if quiet || !isTerminal(w) {
		return nil, func() {}
	}
	start := time.Now()
	var last time.Time
	shown := false
	progress = func(done, total time.Duration) {
		now := time.Now()
		if now.Sub(start) < progressFloor || now.Sub(last) < time.Second {
			return
		}
		last, shown = now, true
		fmt.Fprintf(w, "\r\033[Ksim: %v of %v simulated, %v of wall time", done.Truncate(time.Second), total, now.Sub(start).Truncate(time.Second))
	}
	return progress, func() {
		if shown {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}
