package main

import (
	"context"
	"errors"
	"io"
)

// runMembers lists the members of a node's cluster: `sluice members --addr HOST:PORT`.
func runMembers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not built yet")
}
