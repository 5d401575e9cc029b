package store

import (
	"log/slog"

	badger "github.com/dgraph-io/badger/v4"
)

// Option changes how [Open] configures a [Store].
type Option func(*config)

// config collects the settings chosen by Options.
type config struct {
	logger *slog.Logger
	sync   bool
	tune   func(badger.Options) badger.Options
}

// defaultConfig returns the settings used when no Option overrides them.
func defaultConfig() config {
	return config{sync: true}
}

// WithLogger sends Badger's internal log output to l, mapping Badger's
// error, warning, info and debug messages to the matching slog levels.
// Without this option (or with a nil l) Badger's output is discarded.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithSync chooses whether an on-disk store syncs every write to disk before
// the write returns. It defaults to true because Raft requires log entries and
// votes to be durable once stored; turn it off only for benchmarks or data you
// can afford to lose on a crash. It has no effect on in-memory stores.
func WithSync(sync bool) Option {
	return func(c *config) { c.sync = sync }
}

// WithBadgerOptions lets the caller adjust the Badger options after Open has
// filled them in (directory, in-memory mode, logger, sync writes), for
// example to shrink MemTableSize or BlockCacheSize. fn receives the options
// Open would use and returns the options to open Badger with; it is
// responsible for keeping them valid.
func WithBadgerOptions(fn func(badger.Options) badger.Options) Option {
	return func(c *config) { c.tune = fn }
}
