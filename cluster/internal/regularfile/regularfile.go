// Package regularfile reads the files an operator names (config files,
// certificates) with the checks a long-running process needs: a path that
// is a named pipe, a device or a directory is refused at once, instead of
// blocking the process in open(2) where no signal reaches it, and a file
// larger than the caller's bound is refused without reading it all.
package regularfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrTooLarge is returned by Read for a file larger than its bound.
var ErrTooLarge = errors.New("file is too large")

// ErrNotRegular is returned by Read for a path that is not a regular file
// (a directory, a named pipe, a socket or a device).
var ErrNotRegular = errors.New("not a regular file")

// Read returns the contents of the regular file at path, at most max bytes.
// Errors name the path.
func Read(path string, max int64) ([]byte, error) {
	// Stat first: opening a FIFO for reading blocks until a writer comes.
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", path, ErrTooLarge, max)
	}
	return data, nil
}

// kind names a non-regular file mode in words.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.String()
	}
}
