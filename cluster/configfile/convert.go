package configfile

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// errRulesEmpty is a config without rules.
var errRulesEmpty = errors.New("rules: at least one rule is required")

// convertRule converts one file rule and validates it, returning the field
// at fault with the error.
func convertRule(fr *Rule) (window.Rule, string, error) {
	r := window.Rule{Name: fr.Name}
	// Check the name first, so an error names the rule it is in.
	probe := window.Rule{Name: fr.Name, Count: 1, Window: time.Second, SyncInterval: window.Strict}
	if err := probe.Validate(); err != nil {
		return r, "name", err
	}
	if fr.Count == nil {
		return r, "count", errors.New("count is required: hits allowed per window, 1 … 2^40")
	}
	r.Count = *fr.Count
	if fr.TimeWindow == nil {
		return r, "time_window", errors.New("time_window is required: the window length in seconds, e.g. 10")
	}
	var err error
	if r.Window, err = seconds("time_window", *fr.TimeWindow); err != nil {
		return r, "time_window", err
	}
	if r.Type, err = window.ParseType(fr.WindowType); err != nil {
		return r, "window_type", err
	}
	switch {
	case fr.SyncInterval == nil:
		// Batched, at the default interval (window.WithDefaults).
	case *fr.SyncInterval == -1:
		r.SyncInterval = window.Strict
	case *fr.SyncInterval == 0:
		return r, "sync_interval", errors.New("sync_interval must be -1 (strict) or ≥ 0.01 seconds and < time_window, got 0; leave it out for the default (0.2, or a fifth of time_window if that is shorter)")
	case *fr.SyncInterval < 0:
		return r, "sync_interval", fmt.Errorf("sync_interval must be -1 (strict) or a positive number of seconds, got %v", *fr.SyncInterval)
	default:
		if r.SyncInterval, err = seconds("sync_interval", *fr.SyncInterval); err != nil {
			return r, "sync_interval", err
		}
	}
	if r.Allocation, err = window.ParseAllocation(fr.Allocation); err != nil {
		return r, "allocation", err
	}
	if r.FailMode, err = window.ParseFailMode(fr.FailMode); err != nil {
		return r, "fail_mode", err
	}
	r.Shadow = fr.Shadow
	for i, fl := range fr.Limits {
		var l window.Limit
		at := fmt.Sprintf("limits[%d]", i+1)
		if fl.Count == nil {
			return r, "limits", fmt.Errorf("%s: count is required: hits allowed per window, 1 … 2^40", at)
		}
		if fl.TimeWindow == nil {
			return r, "limits", fmt.Errorf("%s: time_window is required: the window length in seconds, e.g. 60", at)
		}
		l.Count = *fl.Count
		if l.Window, err = seconds("time_window", *fl.TimeWindow); err != nil {
			return r, "limits", fmt.Errorf("%s: %w", at, err)
		}
		if l.Type, err = window.ParseType(fl.WindowType); err != nil {
			return r, "limits", fmt.Errorf("%s: %w", at, err)
		}
		r.Also = append(r.Also, l)
	}
	r = r.WithDefaults()
	if err := r.Validate(); err != nil {
		field := ""
		if fe, ok := errors.AsType[*window.FieldError](err); ok {
			field = fe.Field
		}
		if len(r.Also) > 0 && strings.HasPrefix(err.Error(), "limits") {
			field = "limits"
		}
		return r, field, err
	}
	return r, "", nil
}

// nameSet is the rule names seen so far, each with the 0-based index of the
// rule that has it.
type nameSet map[string]int

// claim records that rule i has name, or reports the rule that already has
// it.
func (s nameSet) claim(i int, name string) error {
	if j, dup := s[name]; dup {
		return fmt.Errorf("name %q is already used by rule %d", name, j+1)
	}
	s[name] = i
	return nil
}

// seconds converts a count of seconds to a duration, rounded to the
// nanosecond, rejecting what no duration can hold.
func seconds(field string, s float64) (time.Duration, error) {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return 0, fmt.Errorf("%s must be a finite number of seconds, got %v", field, s)
	case s < 0:
		return 0, fmt.Errorf("%s must not be negative, got %v", field, s)
	}
	ns := math.Round(s * 1e9)
	if ns >= math.MaxInt64 {
		return 0, fmt.Errorf("%s must be at most %v seconds, got %v", field, time.Duration(math.MaxInt64).Seconds(), s)
	}
	return time.Duration(ns), nil
}

// checkSetting reports whether s is a valid value, in seconds, for the node
// setting field (strict_timeout, persist_interval, …); 0 means the default.
func checkSetting(field string, s float64) error {
	if s < 0 || math.IsNaN(s) || math.IsInf(s, 0) || s > 3600 {
		return fmt.Errorf("%s must be seconds in (0, 3600], got %v", field, s)
	}
	return nil
}

// checkVoters reports whether n is a strict group size; 0 means the
// default.
func checkVoters(n int64) error {
	switch n {
	case 0, 1, 3, 5:
		return nil
	}
	return fmt.Errorf("strict_voters must be 1, 3 or 5, got %d", n)
}

// checkJoin reports whether a, entry i of join, is HOST:PORT or
// dns:NAME:PORT.
func checkJoin(i int, a string) error {
	return cluster.CheckHostPort(fmt.Sprintf("join[%d]", i), strings.TrimPrefix(a, "dns:"))
}
