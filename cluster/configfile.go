package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/window"
)

// FileConfig is a node's YAML config file (`sluice agent --config`): where
// the node listens, whom it joins, and the rules it enforces.
//
//	name: node-1
//	grpc_addr: 127.0.0.1:7070
//	rules:
//	  - name: api
//	    count: 1000
//	    time_window: 10     # seconds
//	    sync_interval: 0.2  # seconds; -1 = strict
//
// Empty fields mean "use the default". Read one with ParseConfigFile or
// LoadConfigFile, which reject unknown fields and invalid rules.
type FileConfig struct {
	// Name identifies the node in the fleet; default the host name.
	Name string `yaml:"name"`
	// GRPCAddr is the HOST:PORT the Limiter gRPC API listens on.
	GRPCAddr string `yaml:"grpc_addr"`
	// GossipAddr is the HOST:PORT memberlist binds to.
	GossipAddr string `yaml:"gossip_addr"`
	// AdvertiseAddr is the HOST:PORT peers reach this node's gossip on, when
	// it differs from GossipAddr (NAT, containers).
	AdvertiseAddr string `yaml:"advertise_addr"`
	// HTTPAddr is the HOST:PORT of /metrics, /healthz and pprof.
	HTTPAddr string `yaml:"http_addr"`
	// Join lists gossip HOST:PORT addresses of peers to join at start.
	Join []string `yaml:"join"`
	// DataDir keeps state across restarts; empty keeps it in memory.
	DataDir string `yaml:"data_dir"`
	// RaftAddr is the HOST:PORT of strict mode's Raft transport; default the
	// gRPC host on a free port. RaftAdvertiseAddr is the one peers dial.
	RaftAddr          string `yaml:"raft_addr"`
	RaftAdvertiseAddr string `yaml:"raft_advertise_addr"`
	// StrictVoters is the size of the strict Raft group: 1, 3 (default) or 5.
	StrictVoters int `yaml:"strict_voters"`
	// StrictTimeout is, in seconds, how long a strict check waits for the
	// leader before its rule's fail_mode answers; default 1.
	StrictTimeout float64 `yaml:"strict_timeout"`
	// BorrowTimeout is, in seconds, how long a check on an owner-allocated
	// rule waits for the key's owner when this node's grant is spent
	// before it is decided from this node's view; default 0.25.
	BorrowTimeout float64 `yaml:"borrow_timeout"`
	// StrictBootstrapWait is, in seconds, how long a node that finds no
	// strict group waits, its view of the fleet unchanged, before it
	// starts one; default 5.
	StrictBootstrapWait float64 `yaml:"strict_bootstrap_wait"`
	// PersistInterval is, in seconds, how often a node with a data_dir saves
	// the counts that changed; a crash loses at most that long's
	// admissions. Default 0.25.
	PersistInterval float64 `yaml:"persist_interval"`
	// ReconnectInterval is, in seconds, how often the node retries failed
	// members and seeds it is not joined to; default 5.
	ReconnectInterval float64 `yaml:"reconnect_interval"`
	// Rules are the limits the node enforces; at least one.
	Rules []FileRule `yaml:"rules"`

	// Path is the file the config was read from, for error messages.
	Path string `yaml:"-"`
}

// FileRule is one rule as the config file spells it (DESIGN §1). Durations
// are seconds as numbers; NodeRules turns it into a window.Rule.
type FileRule struct {
	// Name is the id callers use to pick the rule: [a-zA-Z0-9_.:-], ≤ 128
	// bytes.
	Name string `yaml:"name"`
	// Count is the number of hits a key may spend per window, 1 … 2^40.
	// Required.
	Count *int64 `yaml:"count"`
	// TimeWindow is the window length in seconds (≥ 0.001). Required.
	TimeWindow *float64 `yaml:"time_window"`
	// WindowType is "fixed" or "sliding" (the default).
	WindowType string `yaml:"window_type"`
	// SyncInterval is -1 for a strict (Raft) rule, or for a batched rule
	// how often, in seconds, nodes exchange counts: ≥ 0.01 and below
	// time_window. Left out: batched, every 0.2 s, or a fifth of
	// time_window if that is shorter.
	SyncInterval *float64 `yaml:"sync_interval"`
	// Allocation is, for a batched rule, "owner" (the default),
	// "adaptive" or "classic".
	Allocation string `yaml:"allocation"`
	// FailMode is what a strict rule does without quorum: "open",
	// "closed" or "local" (the default).
	FailMode string `yaml:"fail_mode"`
}

// ConfigError is a problem in a config file: the file, the line when known,
// the rule when the problem is in one, and the field.
type ConfigError struct {
	// Path is the file name; empty when the config did not come from a file.
	Path string
	// Line is the 1-based line in the file, or 0 when unknown.
	Line int
	// Rule is the 1-based position of the rule in the rules list, or 0 when
	// the problem is not in a rule.
	Rule int
	// RuleName is the rule's name, when it has one.
	RuleName string
	// Field is the file's name of the offending field, e.g. "count"; empty
	// for a problem with the file as a whole.
	Field string
	// Err says what is wrong; its text names the field.
	Err error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	switch {
	case e.Path != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.Path, e.Line)
	case e.Path != "":
		b.WriteString(e.Path + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	switch {
	case e.Rule > 0 && e.RuleName != "":
		fmt.Fprintf(&b, "rule %d %q: ", e.Rule, e.RuleName)
	case e.Rule > 0:
		fmt.Fprintf(&b, "rule %d: ", e.Rule)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying problem, e.g. a *window.FieldError.
func (e *ConfigError) Unwrap() error { return e.Err }

// MaxConfigFileSize is the largest config file LoadConfigFile reads.
const MaxConfigFileSize = 4 << 20

// LoadConfigFile reads and parses the config file at path (see
// ParseConfigFile).
func LoadConfigFile(path string) (*FileConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > MaxConfigFileSize {
		return nil, &ConfigError{Path: path, Err: fmt.Errorf("file is larger than %d bytes", MaxConfigFileSize)}
	}
	return ParseConfigFile(path, data)
}

// ParseConfigFile parses a YAML config file; path names it in errors. It
// rejects unknown fields, converts every rule and validates it with
// window.Rule.Validate, and rejects duplicate rule names and malformed
// addresses. Errors are *ConfigError (joined with errors.Join when there are
// several) naming the file, line, rule and field, e.g.
//
//	examples/bad.yaml:7: rule 2 "api": count must be ≥ 1, got 0
func ParseConfigFile(path string, data []byte) (cfg *FileConfig, err error) {
	defer func() {
		// The YAML parser is third-party code; a panic on hostile input
		// must not take the process down.
		if r := recover(); r != nil {
			cfg, err = nil, &ConfigError{Path: path, Err: fmt.Errorf("malformed YAML: %v", r)}
		}
	}()

	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{Path: path, Field: "rules", Err: errors.New("rules: the file is empty; at least one rule is required")}
		}
		return nil, yamlError(path, err, nil)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, yamlError(path, err, nil)
		}
		return nil, &ConfigError{Path: path, Line: line, Err: errors.New("more than one YAML document; a config file holds one")}
	}
	idx := indexLines(&doc)

	cfg = &FileConfig{}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(cfg); err != nil {
		return nil, yamlError(path, err, idx)
	}
	cfg.Path = path
	// The decoder truncates a fractional count; look again, strictly.
	var counts struct {
		Rules []struct {
			Count wholeNumber `yaml:"count"`
		} `yaml:"rules"`
	}
	if err := doc.Decode(&counts); err != nil {
		return nil, yamlError(path, err, idx)
	}

	var errs []error
	for _, a := range []struct{ field, value string }{
		{"grpc_addr", cfg.GRPCAddr}, {"gossip_addr", cfg.GossipAddr},
		{"advertise_addr", cfg.AdvertiseAddr}, {"http_addr", cfg.HTTPAddr},
		{"raft_addr", cfg.RaftAddr}, {"raft_advertise_addr", cfg.RaftAdvertiseAddr},
	} {
		if a.value == "" {
			continue
		}
		if err := CheckHostPort(a.field, a.value); err != nil {
			errs = append(errs, &ConfigError{Path: path, Line: idx.top[a.field], Field: a.field, Err: err})
		}
	}
	if v := cfg.StrictVoters; v != 0 && v != 1 && v != 3 && v != 5 {
		errs = append(errs, &ConfigError{Path: path, Line: idx.top["strict_voters"], Field: "strict_voters",
			Err: fmt.Errorf("strict_voters must be 1, 3 or 5, got %d", v)})
	}
	for _, d := range []struct {
		field string
		v     float64
	}{{"strict_timeout", cfg.StrictTimeout}, {"strict_bootstrap_wait", cfg.StrictBootstrapWait},
		{"borrow_timeout", cfg.BorrowTimeout},
		{"persist_interval", cfg.PersistInterval}, {"reconnect_interval", cfg.ReconnectInterval}} {
		if v := d.v; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > 3600 {
			errs = append(errs, &ConfigError{Path: path, Line: idx.top[d.field], Field: d.field,
				Err: fmt.Errorf("%s must be seconds in (0, 3600], got %v", d.field, v)})
		}
	}
	for i, j := range cfg.Join {
		if err := CheckHostPort(fmt.Sprintf("join[%d]", i), strings.TrimPrefix(j, "dns:")); err != nil {
			errs = append(errs, &ConfigError{Path: path, Line: idx.lineOfJoin(i), Field: "join", Err: err})
		}
	}
	if _, err := convertRules(path, cfg.Rules, idx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// NodeRules converts the file's rules to the rules a node enforces, and
// validates them. For a config from ParseConfigFile it never fails.
func (c *FileConfig) NodeRules() ([]window.Rule, error) {
	return convertRules(c.Path, c.Rules, nil)
}

// CheckHostPort reports whether addr is HOST:PORT with a numeric port
// 0–65535 (HOST may be empty, meaning every interface); the error names
// field.
func CheckHostPort(field, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s must be HOST:PORT, got %q: %w", field, addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%s must have a port number 0–65535, got %q", field, addr)
	}
	return nil
}

// convertRules converts and validates rules. idx, when not nil, supplies
// line numbers.
func convertRules(path string, rules []FileRule, idx *lineIndex) ([]window.Rule, error) {
	if len(rules) == 0 {
		return nil, &ConfigError{Path: path, Line: idx.topLine("rules"), Field: "rules",
			Err: errors.New("rules: at least one rule is required")}
	}
	out := make([]window.Rule, 0, len(rules))
	first := make(map[string]int, len(rules))
	var errs []error
	for i := range rules {
		fr := &rules[i]
		r, field, err := convertRule(fr)
		if err == nil {
			field = "name"
			if j, dup := first[r.Name]; dup {
				err = fmt.Errorf("name %q is already used by rule %d", r.Name, j+1)
			} else {
				first[r.Name] = i
			}
		}
		if err != nil {
			errs = append(errs, &ConfigError{Path: path, Line: idx.ruleLine(i, field), Rule: i + 1,
				RuleName: fr.Name, Field: field, Err: err})
			continue
		}
		out = append(out, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// convertRule converts one file rule and validates it, returning the field
// at fault with the error.
func convertRule(fr *FileRule) (window.Rule, string, error) {
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
	r = r.WithDefaults()
	if err := r.Validate(); err != nil {
		field := ""
		if fe, ok := errors.AsType[*window.FieldError](err); ok {
			field = fe.Field
		}
		return r, field, err
	}
	return r, "", nil
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

// wholeNumber decodes nothing, but fails on a fractional number, which the
// YAML decoder would truncate into an int64.
type wholeNumber struct{}

// UnmarshalYAML fails on a number with a fraction.
func (wholeNumber) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!float" {
		return nil
	}
	if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil && f == math.Trunc(f) {
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal !!float `%s` into int64", n.Line, n.Value)}}
}

// lineIndex remembers where things are in a parsed config file.
type lineIndex struct {
	top   map[string]int // top-level key → line
	rules []ruleLines
	join  []int          // line of each join entry
	at    map[int]lineAt // line → what is on it
}

// ruleLines is where one rule and its fields are.
type ruleLines struct {
	line   int
	name   string
	fields map[string]int
}

// lineAt is what a line holds: a top-level field, or a field of a rule
// (rule ≥ 1). field is empty when a line holds several.
type lineAt struct {
	rule  int
	field string
}

// indexLines walks a parsed document and records the line of every field.
func indexLines(doc *yaml.Node) *lineIndex {
	idx := &lineIndex{top: map[string]int{}, at: map[int]lineAt{}}
	root := resolve(doc)
	if root == nil || root.Kind != yaml.MappingNode {
		return idx
	}
	for k := 0; k+1 < len(root.Content); k += 2 {
		key, val := root.Content[k], resolve(root.Content[k+1])
		idx.top[key.Value] = key.Line
		idx.mark(key.Line, lineAt{field: key.Value})
		if val == nil || val.Kind != yaml.SequenceNode {
			continue
		}
		switch key.Value {
		case "join":
			for _, item := range val.Content {
				idx.join = append(idx.join, item.Line)
				idx.mark(item.Line, lineAt{field: "join"})
			}
		case "rules":
			for i, item := range val.Content {
				rl := ruleLines{line: item.Line, fields: map[string]int{}}
				idx.indexRule(i+1, &rl, item, 0, true)
				if _, ok := idx.at[rl.line]; !ok {
					idx.at[rl.line] = lineAt{rule: i + 1}
				}
				idx.rules = append(idx.rules, rl)
			}
		}
	}
	return idx
}

// indexRule records the lines of a rule's fields, following merge keys
// (<<) into the mappings they merge. Lines reached through an alias belong
// to where the anchor is, so they are not marked as this rule's.
func (idx *lineIndex) indexRule(rule int, rl *ruleLines, m *yaml.Node, depth int, own bool) {
	if m == nil || depth > 10 {
		return
	}
	if m.Kind == yaml.AliasNode || m.Kind == yaml.DocumentNode {
		idx.indexRule(rule, rl, resolve(m), depth+1, false)
		return
	}
	if m.Kind == yaml.SequenceNode { // the value of <<: a list of mappings
		for _, sub := range m.Content {
			idx.indexRule(rule, rl, sub, depth+1, own)
		}
		return
	}
	if m.Kind != yaml.MappingNode {
		return
	}
	for f := 0; f+1 < len(m.Content); f += 2 {
		fk, fv := m.Content[f], m.Content[f+1]
		if fk.Value == "<<" {
			idx.indexRule(rule, rl, fv, depth+1, own)
			continue
		}
		if _, seen := rl.fields[fk.Value]; !seen || depth == 0 {
			rl.fields[fk.Value] = fk.Line
		}
		if fk.Value == "name" && (rl.name == "" || depth == 0) {
			rl.name = fv.Value
		}
		if own {
			idx.mark(fk.Line, lineAt{rule: rule, field: fk.Value})
			idx.mark(fv.Line, lineAt{rule: rule, field: fk.Value})
		}
	}
}

// mark records what is on a line; a line with two different things keeps
// only what they share.
func (idx *lineIndex) mark(line int, a lineAt) {
	old, ok := idx.at[line]
	if !ok {
		idx.at[line] = a
		return
	}
	if old.rule != a.rule {
		old.rule = 0
	}
	if old.field != a.field {
		old.field = ""
	}
	idx.at[line] = old
}

// resolve follows document and alias nodes to the value they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for depth := 0; n != nil && depth < 100; depth++ {
		switch {
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		default:
			return n
		}
	}
	return n
}

func (idx *lineIndex) topLine(field string) int {
	if idx == nil {
		return 0
	}
	return idx.top[field]
}

func (idx *lineIndex) lineOfJoin(i int) int {
	if idx == nil || i >= len(idx.join) {
		return idx.topLine("join")
	}
	return idx.join[i]
}

// ruleLine is the line of rule i's field, or of the rule when the field is
// not written in it.
func (idx *lineIndex) ruleLine(i int, field string) int {
	if idx == nil || i >= len(idx.rules) {
		return 0
	}
	if l, ok := idx.rules[i].fields[field]; ok {
		return l
	}
	return idx.rules[i].line
}

var (
	yamlLineRe     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlUnknownRe  = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	yamlCannotRe   = regexp.MustCompile(`^cannot unmarshal (.*) into (\S+)$`)
	configTypeName = fmt.Sprintf("%T", FileConfig{})
	ruleTypeName   = fmt.Sprintf("%T", FileRule{})
	fileFieldNames = "name, grpc_addr, gossip_addr, advertise_addr, http_addr, join, data_dir, raft_addr, raft_advertise_addr, strict_voters, strict_timeout, strict_bootstrap_wait, borrow_timeout, persist_interval, reconnect_interval, rules"
	ruleFieldNames = "name, count, time_window, window_type, sync_interval, allocation, fail_mode"
)

// fieldKinds says what each field must hold, for type errors.
var fieldKinds = map[string]string{
	"count": "an integer", "time_window": "a number of seconds", "sync_interval": "a number of seconds",
	"strict_timeout": "a number of seconds", "strict_bootstrap_wait": "a number of seconds", "borrow_timeout": "a number of seconds", "persist_interval": "a number of seconds", "reconnect_interval": "a number of seconds",
	"join": "a list of HOST:PORT strings", "rules": "a list of rules",
}

// yamlError turns an error from the YAML decoder into *ConfigErrors naming
// the file, line, rule and field.
func yamlError(path string, err error, idx *lineIndex) error {
	var msgs []string
	if te, ok := errors.AsType[*yaml.TypeError](err); ok {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, 0, len(msgs))
	for _, msg := range msgs {
		ce := &ConfigError{Path: path, Err: errors.New(strings.TrimPrefix(msg, "yaml: "))}
		m := yamlLineRe.FindStringSubmatch(msg)
		if m == nil {
			errs = append(errs, ce)
			continue
		}
		ce.Line, _ = strconv.Atoi(m[1])
		text := m[2]
		var at lineAt
		if idx != nil {
			at = idx.at[ce.Line]
		}
		ce.Rule, ce.Field = at.rule, at.field
		if at.rule > 0 && at.rule <= len(idx.rules) {
			ce.RuleName = idx.rules[at.rule-1].name
		}
		u := yamlUnknownRe.FindStringSubmatch(text)
		c := yamlCannotRe.FindStringSubmatch(text)
		switch {
		case u != nil:
			ce.Field = u[1]
			known := fileFieldNames
			if u[2] == ruleTypeName {
				known = ruleFieldNames
			}
			text = fmt.Sprintf("unknown field %q (known fields: %s)", u[1], known)
		case c != nil && c[2] == configTypeName:
			ce.Field = ""
			text = fmt.Sprintf("the config must be a mapping of fields (%s), got %s", fileFieldNames, c[1])
		case c != nil && c[2] == "[]"+ruleTypeName:
			ce.Rule, ce.RuleName, ce.Field = 0, "", "rules"
			text = "rules must be a list of rules, got " + c[1]
		case c != nil && c[2] == ruleTypeName:
			ce.Field = ""
			text = fmt.Sprintf("a rule must be a mapping of fields (%s), got %s", ruleFieldNames, c[1])
		case c != nil && ce.Field != "":
			kind := fieldKinds[ce.Field]
			if kind == "" {
				kind = "a string"
			}
			text = fmt.Sprintf("%s must be %s, got %s", ce.Field, kind, c[1])
		case ce.Field != "" && !strings.Contains(text, ce.Field):
			text = ce.Field + ": " + text
		}
		ce.Err = errors.New(text)
		errs = append(errs, ce)
	}
	return errors.Join(errs...)
}
