package middleware

import (
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/cluster"
)

// Outcome is what the middleware did with one request.
type Outcome uint8

const (
	// Admitted: the limiter admitted the request, which went on.
	Admitted Outcome = iota
	// Refused: the limiter refused it (429, codes.ResourceExhausted).
	Refused
	// NoKeyPassed: the key function found no key; the request went on
	// unchecked (the default).
	NoKeyPassed
	// NoKeyRefused: the key function found no key and RefuseMissingKey
	// answered 400 (codes.InvalidArgument).
	NoKeyRefused
	// FailedOpen: the limiter returned an error; the request went on
	// unchecked (the default).
	FailedOpen
	// FailedClosed: the limiter returned an error and FailClosed answered
	// 503 (codes.Unavailable).
	FailedClosed
)

// String returns the outcome's name, as a metric label would have it.
func (o Outcome) String() string {
	switch o {
	case Admitted:
		return "admitted"
	case Refused:
		return "refused"
	case NoKeyPassed:
		return "no_key_passed"
	case NoKeyRefused:
		return "no_key_refused"
	case FailedOpen:
		return "failed_open"
	case FailedClosed:
		return "failed_closed"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Event is one request's outcome, as OnEvent is given it.
type Event struct {
	// Outcome is what was done with the request.
	Outcome Outcome
	// Key is the key the limiter was asked about (with Prefix; a hashed
	// long key as hashed); "" for NoKeyPassed and NoKeyRefused.
	Key string
	// Decision is the limiter's, for Admitted and Refused.
	Decision cluster.Decision
	// Err is the limiter's error, for FailedOpen and FailedClosed.
	Err error
}

// Counts counts events by outcome; give its Observe to OnEvent and read
// Stats when exporting. The zero value is ready, and safe for concurrent
// use. One Counts may observe several middlewares.
type Counts struct {
	n [FailedClosed + 1]atomic.Uint64
}

// Observe counts e. It is shaped for OnEvent.
func (c *Counts) Observe(e Event) {
	if int(e.Outcome) < len(c.n) {
		c.n[e.Outcome].Add(1)
	}
}

// Stats returns the counts so far.
func (c *Counts) Stats() Stats {
	return Stats{
		Admitted:     c.n[Admitted].Load(),
		Refused:      c.n[Refused].Load(),
		NoKeyPassed:  c.n[NoKeyPassed].Load(),
		NoKeyRefused: c.n[NoKeyRefused].Load(),
		FailedOpen:   c.n[FailedOpen].Load(),
		FailedClosed: c.n[FailedClosed].Load(),
	}
}

// Stats is a moment's copy of a Counts: requests by Outcome.
type Stats struct {
	Admitted, Refused         uint64
	NoKeyPassed, NoKeyRefused uint64
	FailedOpen, FailedClosed  uint64
}
