package main

import (
	"context"
	"errors"
	"io"
)

// runBench measures a real in-process cluster: `sluice bench accuracy …`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not built yet")
}
