package main

import (
	"context"
	"errors"
	"io"
)

// runDemo runs three nodes in this process on loopback and charts what they admit.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not built yet")
}
