package main

import (
	"fmt"
	"io"
	"os"
)

// writeReportFile writes a report to path with write, for the flag named
// flag; an error names the flag.
func writeReportFile(flag, path string, write func(io.Writer) error) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--%s: %w", flag, err)
	}
	if err := write(out); err != nil {
		out.Close()
		return fmt.Errorf("--%s %s: %w", flag, path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("--%s %s: %w", flag, path, err)
	}
	return nil
}
