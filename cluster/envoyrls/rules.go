package envoyrls

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/window"
)

// unitNames lists the units a rate_limit may have, for messages.
const unitNames = "second, minute, hour, day, week, month or year"

// parseUnit reads a rate_limit's unit, in any case, as envoyproxy/ratelimit
// does.
func parseUnit(s string) (rlsv3.RateLimitResponse_RateLimit_Unit, bool) {
	v, ok := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(s)]
	if !ok || v == int32(rlsv3.RateLimitResponse_RateLimit_UNKNOWN) {
		return 0, false
	}
	return rlsv3.RateLimitResponse_RateLimit_Unit(v), true
}

// unitLength is the window of a unit, as envoyproxy/ratelimit counts it: a
// month is 30 days and a year 365, and windows start at multiples of their
// length since the Unix epoch.
func unitLength(u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	const day = 24 * time.Hour
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return time.Second
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return time.Minute
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return time.Hour
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return day
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * day
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * day
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * day
	}
	return 0
}

// rule converts a limit and its sluice settings to a sluice rule and
// validates it; with counted false (a limit that counts nothing) it only
// checks the settings. A problem is reported at the field that has it, or
// at the rate_limit m.
func (d *decoder) rule(m *yaml.Node, l *limit, s settings, counted bool) {
	at := func(field string) *yaml.Node {
		if k := s.keys[field]; k != nil {
			return k
		}
		return m
	}
	r := window.Rule{Name: ruleName(d.domainName, l.descriptor), Count: int64(l.perUnit), Window: l.window,
		Type: window.Fixed}
	var err error
	if s.windowType != "" {
		if r.Type, err = window.ParseType(s.windowType); err != nil {
			d.fail(at("window_type"), "window_type", err)
		}
	}
	if r.Allocation, err = window.ParseAllocation(s.allocation); err != nil {
		d.fail(at("allocation"), "allocation", err)
	}
	if r.FailMode, err = window.ParseFailMode(s.failMode); err != nil {
		d.fail(at("fail_mode"), "fail_mode", err)
	}
	if si := s.syncInterval; si != nil {
		switch v := *si; {
		case v == -1:
			r.SyncInterval = window.Strict
		case math.IsNaN(v) || math.IsInf(v, 0):
			d.fail(at("sync_interval"), "sync_interval", fmt.Errorf("sync_interval must be a finite number of seconds, got %v", v))
		case v == 0:
			d.fail(at("sync_interval"), "sync_interval", errors.New("sync_interval must be -1 (strict) or ≥ 0.01 seconds and shorter than the unit, got 0; leave it out for the default (0.2, or a fifth of the unit if that is shorter)"))
		case v < 0:
			d.fail(at("sync_interval"), "sync_interval", fmt.Errorf("sync_interval must be -1 (strict) or a positive number of seconds, got %v", v))
		case v > float64(366*24*3600):
			d.fail(at("sync_interval"), "sync_interval", fmt.Errorf("sync_interval must be shorter than the unit, got %v seconds", v))
		default:
			r.SyncInterval = time.Duration(math.Round(v * float64(time.Second)))
		}
	}
	if !counted {
		return
	}
	r = r.WithDefaults()
	if err := r.Validate(); err != nil {
		field := ""
		if fe, ok := errors.AsType[*window.FieldError](err); ok {
			field = fe.Field
		}
		d.fail(at(field), field, err)
		return
	}
	l.rule, l.fixed = r.Name, r.Type == window.Fixed
	if o, dup := d.dom.origins[r.Name]; dup {
		d.fail(m, "", fmt.Errorf("rule name %q is also that of descriptor %q (line %d); rename a key", r.Name, o.descriptor, o.line))
		return
	}
	d.dom.origins[r.Name] = origin{line: m.Line, descriptor: l.descriptor}
	d.dom.rules = append(d.dom.rules, r)
}
