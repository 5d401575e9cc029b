package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// slogLogger adapts an *slog.Logger to badger.Logger.
type slogLogger struct {
	l *slog.Logger
}

// Errorf logs a Badger error message at slog.LevelError.
func (s slogLogger) Errorf(format string, args ...any) { s.log(slog.LevelError, format, args) }

// Warningf logs a Badger warning message at slog.LevelWarn.
func (s slogLogger) Warningf(format string, args ...any) { s.log(slog.LevelWarn, format, args) }

// Infof logs a Badger informational message at slog.LevelInfo.
func (s slogLogger) Infof(format string, args ...any) { s.log(slog.LevelInfo, format, args) }

// Debugf logs a Badger debug message at slog.LevelDebug.
func (s slogLogger) Debugf(format string, args ...any) { s.log(slog.LevelDebug, format, args) }

// log formats a message only if the logger would keep it. Badger terminates
// some messages with a newline, which slog does not want.
func (s slogLogger) log(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return
	}
	s.l.Log(ctx, level, strings.TrimRight(fmt.Sprintf(format, args...), "\n"), "component", "badger")
}
