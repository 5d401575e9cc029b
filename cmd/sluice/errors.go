package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
)

// exitCode prints err, if it calls for a message, and returns the exit status
// it stands for. A plain error is one line on stderr, "sluice NAME: …"; a
// usage error adds a pointer to the command's help; an error of a command
// run with --json is one JSON object on stdout instead (see jsonError).
func exitCode(name string, err error, stdout, stderr io.Writer) int {
	var st exitStatus
	var ue usageError
	var je jsonError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &st):
		return int(st)
	case errors.As(err, &je):
		if werr := json.NewEncoder(stdout).Encode(errorJSON{Error: je.err.Error(), Code: errorCode(je.err)}); werr != nil {
			fmt.Fprintf(stderr, "sluice %s: %v\n", name, je.err)
		}
		return 2
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "sluice %s: %v\nrun 'sluice %s --help' for usage\n", name, err, name)
		return 2
	default:
		fmt.Fprintf(stderr, "sluice %s: %v\n", name, err)
		return 2
	}
}

// exitStatus is an outcome that is not an error but has its own exit status,
// such as a refused check (1). Nothing is printed for it.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// usageError is a mistake on the command line; it exits 2 with a pointer to
// the usage text.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// jsonError is the error of a command run with --json: it is printed as
// one errorJSON object on stdout, where the command's answer would have
// been, so that a script reads one JSON object from stdout whatever
// happened, and tells the outcome by the exit status (2).
type jsonError struct{ err error }

func (e jsonError) Error() string { return e.err.Error() }
func (e jsonError) Unwrap() error { return e.err }

// errorJSON is what a command run with --json prints when it fails.
type errorJSON struct {
	// Error is the message the command prints without --json, less the
	// "sluice NAME: " in front.
	Error string `json:"error"`
	// Code is "usage" for a mistake on the command line; for a call to a
	// node that failed, the gRPC status code in snake case ("unavailable",
	// "deadline_exceeded", "not_found", "invalid_argument", …); else
	// "error".
	Code string `json:"code"`
}

// jsonErrors marks err to be printed as JSON when asJSON is set; help and
// exit statuses, which are no errors, pass unchanged.
func jsonErrors(asJSON bool, err error) error {
	var st exitStatus
	if !asJSON || err == nil || errors.Is(err, flag.ErrHelp) || errors.As(err, &st) {
		return err
	}
	return jsonError{err}
}

// errorCode is err's code in errorJSON.
func errorCode(err error) string {
	var ne *nodeError
	var ue usageError
	switch {
	case errors.As(err, &ne):
		return ne.code
	case errors.As(err, &ue):
		return "usage"
	}
	return "error"
}
