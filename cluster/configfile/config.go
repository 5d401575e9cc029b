package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/internal/regularfile"
	"github.com/sluicehq/sluice/window"
)

// Config is a node's config file: where the node listens, whom it joins,
// and the rules it enforces.
//
//	name: node-1
//	grpc_addr: 127.0.0.1:7070
//	rules:
//	  - name: api
//	    count: 1000
//	    time_window: 10     # seconds
//	    sync_interval: 0.2  # seconds; -1 = strict
//
// Empty fields mean "use the default". Read one with Parse or Load, which
// reject unknown fields, invalid settings and invalid rules.
type Config struct {
	// Name identifies the node in the fleet; default the host name.
	Name string
	// GRPCAddr (grpc_addr) is the HOST:PORT the Limiter gRPC API listens
	// on.
	GRPCAddr string
	// GossipAddr (gossip_addr) is the HOST:PORT memberlist binds to.
	GossipAddr string
	// AdvertiseAddr (advertise_addr) is the HOST:PORT peers reach this
	// node's gossip on, when it differs from GossipAddr (NAT, containers).
	AdvertiseAddr string
	// HTTPAddr (http_addr) is the HOST:PORT of /metrics, /healthz and pprof.
	HTTPAddr string
	// Join lists gossip HOST:PORT (or dns:NAME:PORT) addresses of peers to
	// join at start.
	Join []string
	// DataDir (data_dir) keeps state across restarts; empty keeps it in
	// memory.
	DataDir string
	// RaftAddr (raft_addr) is the HOST:PORT of strict mode's Raft
	// transport; default the gRPC host on a free port. RaftAdvertiseAddr
	// (raft_advertise_addr) is the one peers dial.
	RaftAddr          string
	RaftAdvertiseAddr string
	// StrictVoters (strict_voters) is the size of the strict Raft group: 1,
	// 3 (default) or 5.
	StrictVoters int
	// StrictTimeout (strict_timeout) is, in seconds, how long a strict check
	// waits for the leader before its rule's fail_mode answers; default 1.
	StrictTimeout float64
	// BorrowTimeout (borrow_timeout) is, in seconds, how long a check on an
	// owner-allocated rule waits for the key's owner when this node's grant
	// is spent before it is decided from this node's view; default 0.25.
	BorrowTimeout float64
	// StrictBootstrapWait (strict_bootstrap_wait) is, in seconds, how long
	// a node that finds no strict group waits, its view of the fleet
	// unchanged, before it starts one; default 5.
	StrictBootstrapWait float64
	// PersistInterval (persist_interval) is, in seconds, how often a node
	// with a data_dir saves the counts that changed; a crash loses at most
	// that long's admissions. Default 0.25.
	PersistInterval float64
	// ReconnectInterval (reconnect_interval) is, in seconds, how often the
	// node retries failed members and seeds it is not joined to; default 5.
	ReconnectInterval float64
	// MaxKeys (max_keys) bounds the keys the node holds, every rule's
	// together (cluster.Config.MaxKeys): left out or 0, 1,000,000; -1 (or
	// any negative number), no bound.
	MaxKeys int
	// TLS (tls) secures the gRPC port and the Raft transport
	// (cluster.TLS); nil serves plaintext.
	TLS *TLS
	// Insecure (insecure: true) serves plaintext gRPC and Raft on
	// addresses other than loopback, on purpose.
	Insecure bool
	// SecretKeys (secret_keys) encrypt gossip (cluster.Config.SecretKeys):
	// in the file, a list of base64 strings (standard encoding), each
	// 16, 24 or 32 bytes once decoded; here, decoded. The first encrypts.
	SecretKeys [][]byte
	// SecretKeysFile (secret_keys_file) names a file holding the keys
	// instead, one base64 key per line, so that they need not sit in this
	// file; NodeSecretKeys reads it.
	SecretKeysFile string
	// GossipPlaintext (gossip_plaintext) is refuse (the default), accept
	// or send: what a node with keys does with plaintext gossip
	// (cluster.GossipPlaintext).
	GossipPlaintext string
	// Rules are the limits the node enforces; at least one.
	Rules []Rule

	// Path is the file the config was read from, for error messages. It is
	// not a field of the file.
	Path string
	// secretKeysFileLine is the line of secret_keys_file, for the errors
	// of reading the file it names.
	secretKeysFileLine int
}

// TLS is the tls mapping of the file: the node's certificate and the CAs
// it trusts, PEM files read again when they change (cluster.TLS).
//
//	tls:
//	  cert_file: /etc/sluice/node.pem    # the node's certificate (+ intermediates)
//	  key_file: /etc/sluice/node.key
//	  peer_ca_file: /etc/sluice/peer-ca.pem
//	  client_ca_file: /etc/sluice/client-ca.pem  # optional
//	  require_client_cert: true                  # optional
type TLS struct {
	// CertFile (cert_file) and KeyFile (key_file) are the node's
	// certificate, followed by its intermediates, and its key; required.
	CertFile, KeyFile string
	// PeerCAFile (peer_ca_file) holds the CAs whose certificates make
	// peers; required.
	PeerCAFile string
	// ClientCAFile (client_ca_file) holds more CAs whose certificates
	// clients may present; optional.
	ClientCAFile string
	// RequireClientCert (require_client_cert: true) refuses clients that
	// present no certificate.
	RequireClientCert bool
}

// Rule is one rule as the config file spells it (DESIGN §1). Durations are
// seconds as numbers; Config.NodeRules turns it into a window.Rule. A nil
// pointer is a field the file leaves out.
type Rule struct {
	// Name is the id callers use to pick the rule: [a-zA-Z0-9_.:-], ≤ 128
	// bytes.
	Name string
	// Count is the number of hits a key may spend per window, 1 … 2^40.
	// Required.
	Count *int64
	// TimeWindow (time_window) is the window length in seconds (≥ 0.001).
	// Required.
	TimeWindow *float64
	// WindowType (window_type) is "fixed" or "sliding" (the default).
	WindowType string
	// SyncInterval (sync_interval) is -1 for a strict (Raft) rule, or for a
	// batched rule how often, in seconds, nodes exchange counts: ≥ 0.01 and
	// below time_window. Left out: batched, every 0.2 s, or a fifth of
	// time_window if that is shorter. 0 is an error, so that a rule that
	// means "the default" says so by leaving the field out.
	SyncInterval *float64
	// Allocation is, for a batched rule, "owner" (the default), "adaptive"
	// or "classic".
	Allocation string
	// FailMode (fail_mode) is what a strict rule does without quorum:
	// "open", "closed" or "local" (the default).
	FailMode string
	// Limits are more limits a check must fit as well, all or nothing
	// (window.Rule.Also): a rule of 20 per second may also hold 1,000 per
	// minute, batched or strict.
	Limits []Limit
	// Shadow (shadow: true) computes, counts and reports the rule's
	// decisions but admits every caller (window.Rule.Shadow).
	Shadow bool
}

// Limit is one more limit of a rule, as the file spells it.
type Limit struct {
	// Count and TimeWindow (time_window) are required, as for a rule;
	// WindowType (window_type) is "fixed" or "sliding" (the default).
	Count      *int64
	TimeWindow *float64
	WindowType string
}

// MaxSize is the largest config file Load reads, in bytes.
const MaxSize = 4 << 20

// Load reads and parses the config file at path (see Parse).
func Load(path string) (*Config, error) {
	data, err := regularfile.Read(path, MaxSize)
	if errors.Is(err, regularfile.ErrTooLarge) {
		return nil, &Error{Path: path, Err: fmt.Errorf("file is larger than %d bytes", MaxSize)}
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a YAML config file; path names it in errors. It rejects
// unknown and duplicate fields, values of the wrong type, malformed
// addresses and out-of-range settings, converts every rule and validates it
// with window.Rule.Validate, and rejects duplicate rule names. Anchors,
// aliases and merge keys (<<) are followed. Errors are *Error (joined with
// errors.Join when there are several, in the order of the file) naming the
// file, line, rule and field, e.g.
//
//	examples/bad.yaml:7: rule 2 "api": count must be ≥ 1, got 0
//
// A file the YAML parser cannot read is an *Error holding the parser's own
// error, whose text says where it stopped when the parser knows.
func Parse(path string, data []byte) (cfg *Config, err error) {
	defer func() {
		// The YAML parser is third-party code; a panic on hostile input
		// must not take the process down.
		if r := recover(); r != nil {
			cfg, err = nil, &Error{Path: path, Err: fmt.Errorf("malformed YAML: %v", r)}
		}
	}()
	if err := checkText(path, data); err != nil {
		return nil, err
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Path: path, Field: "rules", Err: errors.New("rules: the file is empty; at least one rule is required")}
		}
		return nil, &Error{Path: path, Err: err}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, &Error{Path: path, Err: err}
	default:
		return nil, &Error{Path: path, Line: extra.Line, Err: errors.New("more than one YAML document; a config file holds one")}
	}

	d := newDecoder(path)
	cfg = d.config(&doc)
	if err := d.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// NodeRules converts the file's rules to the rules a node enforces, and
// validates them. For a config from Parse it never fails.
func (c *Config) NodeRules() ([]window.Rule, error) {
	if len(c.Rules) == 0 {
		return nil, &Error{Path: c.Path, Field: "rules", Err: errRulesEmpty}
	}
	out := make([]window.Rule, 0, len(c.Rules))
	names := nameSet{}
	var errs []error
	for i := range c.Rules {
		fr := &c.Rules[i]
		r, field, err := convertRule(fr)
		if err == nil {
			field, err = "name", names.claim(i, r.Name)
		}
		if err != nil {
			errs = append(errs, &Error{Path: c.Path, Rule: i + 1, RuleName: fr.Name, Field: field, Err: err})
			continue
		}
		out = append(out, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// NodeConfig is the node the file describes, for cluster.Start: its rules
// and settings, with seconds turned into durations, and its gossip keys
// (NodeSecretKeys, which reads a secret_keys_file). What the file leaves
// out stays zero, which cluster.Start reads as its default; the caller adds
// what a file does not say (Logger, ShutdownTimeout, …), and Strict
// (strict.Mode{}) if the file may hold strict rules: this package does not
// import strict mode. For a config from Parse it fails only for a
// secret_keys_file that cannot be read or does not hold valid keys.
func (c *Config) NodeConfig() (cluster.Config, error) {
	rules, err := c.NodeRules()
	if err != nil {
		return cluster.Config{}, err
	}
	cfg := cluster.Config{
		Name:              c.Name,
		Rules:             rules,
		GRPCAddr:          c.GRPCAddr,
		BindAddr:          c.GossipAddr,
		AdvertiseAddr:     c.AdvertiseAddr,
		Join:              c.Join,
		DataDir:           c.DataDir,
		RaftAddr:          c.RaftAddr,
		RaftAdvertiseAddr: c.RaftAdvertiseAddr,
		StrictVoters:      c.StrictVoters,
		MaxKeys:           c.MaxKeys,
		Insecure:          c.Insecure,
	}
	if cfg.SecretKeys, err = c.NodeSecretKeys(); err != nil {
		return cluster.Config{}, err
	}
	if cfg.GossipPlaintext, err = cluster.ParseGossipPlaintext(c.GossipPlaintext); err != nil {
		return cluster.Config{}, &Error{Path: c.Path, Field: "gossip_plaintext", Err: err}
	}
	if t := c.TLS; t != nil {
		cfg.TLS = &cluster.TLS{CertFile: t.CertFile, KeyFile: t.KeyFile, PeerCAFile: t.PeerCAFile,
			ClientCAFile: t.ClientCAFile, RequireClientCert: t.RequireClientCert}
	}
	var errs []error
	for _, s := range []struct {
		field string
		v     float64
		dst   *time.Duration
	}{
		{"strict_timeout", c.StrictTimeout, &cfg.StrictTimeout},
		{"borrow_timeout", c.BorrowTimeout, &cfg.BorrowTimeout},
		{"strict_bootstrap_wait", c.StrictBootstrapWait, &cfg.StrictBootstrapWait},
		{"persist_interval", c.PersistInterval, &cfg.PersistInterval},
		{"reconnect_interval", c.ReconnectInterval, &cfg.ReconnectInterval},
	} {
		if err := checkSetting(s.field, s.v); err != nil {
			errs = append(errs, &Error{Path: c.Path, Field: s.field, Err: err})
			continue
		}
		*s.dst = time.Duration(math.Round(s.v * float64(time.Second)))
	}
	if len(errs) > 0 {
		return cluster.Config{}, errors.Join(errs...)
	}
	return cfg, nil
}
