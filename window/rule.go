package window

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Type says how a window counts: in epoch-aligned fixed slices, or as a
// sliding estimate over the current and previous slice.
type Type uint8

const (
	// Sliding is the default: the previous window's count decays linearly
	// as the current window advances (the sliding window counter).
	Sliding Type = iota
	// Fixed admits up to the limit in each epoch-aligned window.
	Fixed
)

// String returns the rule-file spelling of t.
func (t Type) String() string {
	switch t {
	case Sliding:
		return "sliding"
	case Fixed:
		return "fixed"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// ParseType reads the rule-file spelling of a window type.
func ParseType(s string) (Type, error) {
	switch s {
	case "sliding", "":
		return Sliding, nil
	case "fixed":
		return Fixed, nil
	}
	return 0, fmt.Errorf("window_type must be fixed or sliding, got %q", s)
}

// Allocation says how a batched rule shares the budget between nodes between
// syncs.
type Allocation uint8

const (
	// Owner is the default: each key has an owner among the live nodes;
	// nodes report their counts for the key to its owner alone and admit
	// from what it grants them, borrowing when a grant is spent and the
	// fleet may have room. Sync work and memory grow with the keys a node
	// serves, not with the fleet, and small counts behave as one exact
	// limiter.
	Owner Allocation = iota
	// Classic reproduces the common gateway behaviour: each node caches the
	// global remaining count at every sync and spends it alone.
	Classic
	// Adaptive is full-mesh sync: every node sends its counts for every key
	// to every peer, spends a demand-weighted share of the global remaining
	// budget and publishes what it has reserved. Its cost per key grows
	// with the fleet; it suits a few nodes.
	Adaptive
)

// String returns the rule-file spelling of a.
func (a Allocation) String() string {
	switch a {
	case Adaptive:
		return "adaptive"
	case Classic:
		return "classic"
	case Owner:
		return "owner"
	}
	return fmt.Sprintf("Allocation(%d)", uint8(a))
}

// ParseAllocation reads the rule-file spelling of an allocation policy.
func ParseAllocation(s string) (Allocation, error) {
	switch s {
	case "owner", "":
		return Owner, nil
	case "adaptive":
		return Adaptive, nil
	case "classic":
		return Classic, nil
	}
	return 0, fmt.Errorf("allocation must be owner, adaptive or classic, got %q", s)
}

// FailMode says what a strict rule does when no quorum can be reached.
type FailMode uint8

const (
	// FailLocal is the default: enforce the rule on this node alone.
	FailLocal FailMode = iota
	// FailOpen admits every request.
	FailOpen
	// FailClosed refuses every request.
	FailClosed
)

// String returns the rule-file spelling of f.
func (f FailMode) String() string {
	switch f {
	case FailLocal:
		return "local"
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("FailMode(%d)", uint8(f))
}

// ParseFailMode reads the rule-file spelling of a fail mode.
func ParseFailMode(s string) (FailMode, error) {
	switch s {
	case "local", "":
		return FailLocal, nil
	case "open":
		return FailOpen, nil
	case "closed":
		return FailClosed, nil
	}
	return 0, fmt.Errorf("fail_mode must be open, closed or local, got %q", s)
}

// Strict is the SyncInterval of a rule that decides through the Raft log.
const Strict time.Duration = -1

// Limits on rule fields.
const (
	MaxCount        = int64(1) << 40
	MaxNameLen      = 128
	MinWindow       = time.Millisecond
	MinSyncInterval = 10 * time.Millisecond
)

// Rule is one rate limit: Count requests per key per Window, counted as Type,
// shared between nodes as SyncInterval and Allocation say.
type Rule struct {
	// Name is the id callers use to pick the rule.
	Name string
	// Count is how many hits a key may spend per window.
	Count int64
	// Window is the window length.
	Window time.Duration
	// Type is Sliding (the zero value) or Fixed.
	Type Type
	// SyncInterval is Strict (-1) for Raft-backed exact decisions, or how
	// often a batched rule exchanges counts with peers; 0 is the default
	// (see WithDefaults).
	SyncInterval time.Duration
	// Allocation is how a batched rule divides budget between syncs.
	Allocation Allocation
	// FailMode is what a strict rule does without a quorum.
	FailMode FailMode
	// Also are more limits a check under the rule must fit as well, all or
	// nothing: a burst cap of 20 per second beside 1,000 per minute, say.
	// Each is enforced as a part of its own (see Parts), sharing the rule's
	// other fields.
	Also []Limit
	// Shadow has the rule's decisions computed, counted and reported, but
	// every caller admitted: a new limit tried on live traffic.
	Shadow bool
}

// Limit is one more count per window that a rule holds (Rule.Also).
type Limit struct {
	Count  int64
	Window time.Duration
	Type   Type
}

// DefaultSyncInterval is the sync interval of a batched rule that sets none,
// where its window is a second or longer.
const DefaultSyncInterval = 200 * time.Millisecond

// WithDefaults returns r with what it leaves unset filled in: a zero
// SyncInterval becomes DefaultSyncInterval, or a fifth of the window where
// that is shorter, but never less than MinSyncInterval. Nodes and replicas
// apply it to the rules they are given, so that Rule{Name, Count, Window}
// is a batched rule that works.
func (r Rule) WithDefaults() Rule {
	if r.SyncInterval == 0 {
		r.SyncInterval = max(MinSyncInterval, min(DefaultSyncInterval, r.Window/5))
	}
	return r
}

// WithDefaults returns a copy of rules, each with its defaults filled in.
func WithDefaults(rules []Rule) []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		out[i] = r.WithDefaults()
	}
	return out
}

// IsStrict reports whether r decides through the Raft log.
func (r *Rule) IsStrict() bool { return r.SyncInterval == Strict }

// ErrInvalidRule matches (with errors.Is) every error Validate returns.
var ErrInvalidRule = errors.New("invalid rule")

// FieldError is a rule field that is out of range; its text names the field
// as the rule file spells it.
type FieldError struct {
	// Field is the rule-file name of the field, e.g. "count".
	Field string
	// Problem says what is wrong, e.g. "must be ≥ 1, got 0".
	Problem string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Problem }

// Is makes every FieldError match ErrInvalidRule.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidRule }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Validate checks r against the ranges of each field and returns an error
// naming the first field that is out of range.
func (r *Rule) Validate() error {
	if err := validateName(r.Name); err != nil {
		return err
	}
	return r.validateFields()
}

// ValidatePart is Validate for a rule as the counters hold it, one of the
// parts of a rule (Parts): its name may end in PartSep and the part's
// number, and it holds one limit.
func (r *Rule) ValidatePart() error {
	name := r.Name
	if i := strings.Index(name, PartSep); i > 0 {
		if n, err := strconv.Atoi(name[i+len(PartSep):]); err == nil && n >= 2 && n <= MaxLimits {
			name = name[:i]
		}
	}
	if err := validateName(name); err != nil {
		return err
	}
	if len(r.Also) > 0 {
		return fieldErr("limits", "must be split into parts (Rule.Parts) before the counters take them")
	}
	return r.validateFields()
}

func (r *Rule) validateFields() error {
	if r.Count < 1 {
		return fieldErr("count", "must be ≥ 1, got %d", r.Count)
	}
	if r.Count > MaxCount {
		return fieldErr("count", "must be ≤ 2^40 (%d), got %d", MaxCount, r.Count)
	}
	if r.Window < MinWindow {
		return fieldErr("time_window", "must be ≥ 1ms, got %v", r.Window)
	}
	if r.Type != Sliding && r.Type != Fixed {
		return fieldErr("window_type", "must be fixed or sliding, got %v", r.Type)
	}
	if !r.IsStrict() {
		if r.SyncInterval < MinSyncInterval || r.SyncInterval >= r.Window {
			return fieldErr("sync_interval", "must be -1 (strict) or ≥ 10ms and < time_window (%v), got %v",
				r.Window, r.SyncInterval)
		}
	}
	if r.Allocation > Adaptive {
		return fieldErr("allocation", "must be owner, adaptive or classic, got %v", r.Allocation)
	}
	if r.FailMode > FailClosed {
		return fieldErr("fail_mode", "must be open, closed or local, got %v", r.FailMode)
	}
	if len(r.Also) > MaxLimits-1 {
		return fieldErr("limits", "must hold at most %d limits, got %d", MaxLimits, len(r.Also)+1)
	}
	return r.validateAlso()
}

// MaxLimits is the most limits one rule may hold: each is a check of its
// own on every request.
const MaxLimits = 8

func validateName(name string) error {
	if name == "" {
		return fieldErr("name", "must not be empty")
	}
	if len(name) > MaxNameLen {
		return fieldErr("name", "must be ≤ %d bytes, got %d", MaxNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '.' || c == ':' || c == '-'
		if !ok {
			return fieldErr("name", "%q has %q at byte %d; allowed are letters, digits and _.:-", name, c, i)
		}
	}
	return nil
}
