package main

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// Progress goes to a terminal only: a buffer or a pipe, where a script
// reads the output, gets nothing, however long the run.
func TestProgressQuietOffATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var buf bytes.Buffer
	for _, out := range []interface{ Write([]byte) (int, error) }{&buf, w} {
		if isTerminal(out) {
			t.Errorf("%T taken for a terminal", out)
		}
		stop := showProgress(out, "run", time.Hour, false)
		stop()
		stop() // twice is harmless
		progress, stopSim := simProgress(out, false)
		if progress != nil {
			t.Errorf("a sim progress function for %T, which is not a terminal", out)
		}
		stopSim()
	}
	w.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 || got.Len() != 0 {
		t.Errorf("progress wrote %q to a buffer and %q to a pipe, want nothing", buf.String(), got.String())
	}
}
