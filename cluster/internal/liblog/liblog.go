// Package liblog turns the log lines of the libraries a node runs
// (memberlist, and hclog for Raft) into records of the node's slog logger.
package liblog

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
)

// Writer turns a library's log lines ("[LEVEL] …", as memberlist and hclog
// write them) into slog records.
type Writer struct {
	// Log receives the records.
	Log *slog.Logger
	// QuietWarn keeps a library's warnings below the node's own: memberlist
	// warns of peers coming and going, which the node reports itself.
	QuietWarn bool
	// Closing, when set, reports that the node is shutting down: what a
	// library then logs as a warning or an error (a gossip send racing the
	// close of its own socket) is the shutdown itself, logged as debug.
	Closing func() bool
	// Observe, when set, is called with each line, its level prefix cut,
	// before it is logged: the node counts what a library reports only in
	// its log (gossip it refused for its encryption).
	Observe func(line string)
}

// Write logs one line at the level its prefix names (info without one).
func (w *Writer) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	level := slog.LevelInfo
	for _, l := range []struct {
		prefix string
		level  slog.Level
	}{{"[TRACE]", slog.LevelDebug - 4}, {"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo},
		{"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError}} {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			line, level = strings.TrimSpace(rest), l.level
			break
		}
	}
	if w.Observe != nil {
		w.Observe(line)
	}
	if w.QuietWarn && level == slog.LevelWarn {
		level = slog.LevelInfo
	}
	if level >= slog.LevelWarn && w.Closing != nil && w.Closing() {
		level = slog.LevelDebug
	}
	w.Log.Log(context.Background(), level, line)
	return len(p), nil
}

var _ io.Writer = (*Writer)(nil)
