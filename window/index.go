package window

import "time"

// Index returns the number of the window that the moment now (Unix
// nanoseconds) falls in: floor(now / w). Windows are epoch-aligned, so every
// node agrees on their boundaries without talking.
func Index(now int64, w time.Duration) int64 {
	q := now / int64(w)
	if now%int64(w) < 0 {
		q--
	}
	return q
}

// Start returns the first moment (Unix nanoseconds) of window idx.
func Start(idx int64, w time.Duration) int64 { return idx * int64(w) }

// Elapsed returns how far into its window the moment now is.
func Elapsed(now int64, w time.Duration) time.Duration {
	e := now % int64(w)
	if e < 0 {
		e += int64(w)
	}
	return time.Duration(e)
}
