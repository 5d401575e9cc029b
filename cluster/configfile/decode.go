package configfile

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/cluster"
)

// Tags the decoder tells apart.
const (
	nullTag  = "!!null"
	intTag   = "!!int"
	floatTag = "!!float"
	mergeTag = "!!merge"
)

// level is where a mapping sits in the file, which says the fields it may
// hold.
type level int

const (
	topLevel   level = iota // the node's settings and its rules
	ruleLevel               // one rule
	limitLevel              // one more limit of a rule
	tlsLevel                // the tls mapping
)

// The fields of each level, in the order the messages list them.
var (
	topFields = []string{"name", "grpc_addr", "gossip_addr", "advertise_addr", "http_addr", "join", "data_dir",
		"raft_addr", "raft_advertise_addr", "strict_voters", "strict_timeout", "strict_bootstrap_wait",
		"borrow_timeout", "persist_interval", "reconnect_interval", "max_keys", "tls", "insecure", "secret_keys", "secret_keys_file",
		"gossip_plaintext", "rules"}
	ruleFields = []string{"name", "count", "time_window", "window_type", "sync_interval", "allocation", "fail_mode",
		"limits", "shadow"}
	limitFields = []string{"count", "time_window", "window_type"}
	tlsFields   = []string{"cert_file", "key_file", "peer_ca_file", "client_ca_file", "require_client_cert"}
)

// tlsPrefix is what the fields of the tls mapping are named with in
// errors: tls.cert_file.
const tlsPrefix = "tls."

// fields is the fields a mapping at l may hold.
func (l level) fields() []string {
	switch l {
	case ruleLevel:
		return ruleFields
	case limitLevel:
		return limitFields
	case tlsLevel:
		return tlsFields
	}
	return topFields
}

// unknown is the error for a key that is not a field at l. A key that is a
// field at the other level was likely written at the wrong depth; say so.
func (l level) unknown(key string) error {
	msg := fmt.Sprintf("unknown field %q (known fields: %s)", key, strings.Join(l.fields(), ", "))
	if l == tlsLevel {
		msg = fmt.Sprintf("unknown field %q in tls (known fields: %s)", key, strings.Join(l.fields(), ", "))
	}
	switch {
	case l == topLevel && slices.Contains(tlsFields, key):
		msg += fmt.Sprintf("; %s is a field of tls: write it in the tls mapping", key)
	case l == tlsLevel && slices.Contains(topFields, key):
		msg += fmt.Sprintf("; %s is a node setting: write it at the top level, outside tls", key)
	case l == topLevel && slices.Contains(ruleFields, key):
		msg += fmt.Sprintf("; %s is a field of a rule: write it in an entry of the rules list", key)
	case l == ruleLevel && slices.Contains(topFields, key):
		msg += fmt.Sprintf("; %s is a node setting: write it at the top level, outside rules", key)
	case l == limitLevel && slices.Contains(ruleFields, key):
		msg += fmt.Sprintf("; %s is a field of the rule, shared by all its limits: write it beside the rule's count", key)
	}
	return errors.New(msg)
}

// field is one key of a mapping with its value.
type field struct {
	// key is the key as written, for its line.
	key *yaml.Node
	// name is the key's text.
	name string
	// value is the value, aliases followed.
	value *yaml.Node
}

// fieldsKey names a mapping read at a level.
type fieldsKey struct {
	m *yaml.Node
	l level
}

// decoder walks a parsed config document and fills a Config, recording
// each problem with the line of the node it is about.
type decoder struct {
	path string
	errs []*Error
	// rule is the 1-based position of the rule being read, 0 outside the
	// rules.
	rule int
	// fields holds the fields of every mapping read so far, so that a
	// mapping merged or aliased many times is read, and its problems
	// reported, once.
	fields map[fieldsKey][]field
	// reading marks the mappings whose fields are being gathered, to catch
	// a mapping that merges itself.
	reading map[*yaml.Node]bool
}

func newDecoder(path string) *decoder {
	return &decoder{path: path, fields: map[fieldsKey][]field{}, reading: map[*yaml.Node]bool{}}
}

// fail records a problem with field (empty for none) at n's line.
func (d *decoder) fail(n *yaml.Node, field string, err error) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &Error{Path: d.path, Line: line, Rule: d.rule, Field: field, Err: err})
}

// wrongType records that f's value is not what the field holds.
func (d *decoder) wrongType(f field, want string) {
	d.fail(f.value, f.name, fmt.Errorf("%s must be %s, got %s", f.name, want, describe(f.value)))
}

// err is the problems recorded, in the order of the file, or nil.
func (d *decoder) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	// A problem without a line is about something the file leaves out;
	// it comes last.
	at := func(e *Error) int {
		if e.Line == 0 {
			return math.MaxInt
		}
		return e.Line
	}
	slices.SortStableFunc(d.errs, func(a, b *Error) int { return cmp.Compare(at(a), at(b)) })
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// config reads the document: a mapping of node settings and rules.
func (d *decoder) config(doc *yaml.Node) *Config {
	c := &Config{Path: d.path}
	root := resolve(doc)
	switch {
	case root == nil || root.Kind == yaml.ScalarNode && root.ShortTag() == nullTag:
		d.fail(doc, "rules", errors.New("rules: the document is empty; at least one rule is required"))
		return c
	case root.Kind != yaml.MappingNode:
		d.fail(root, "", fmt.Errorf("the config must be a mapping of fields (%s), got %s",
			strings.Join(topFields, ", "), describe(root)))
		return c
	}
	hasRules, hasKeys := false, false
	var insecureKey, keysFileKey, plaintextKey *yaml.Node
	for _, f := range d.fieldsOf(root, topLevel) {
		switch f.name {
		case "name":
			d.text(f, &c.Name)
		case "grpc_addr":
			d.addr(f, &c.GRPCAddr)
		case "gossip_addr":
			d.addr(f, &c.GossipAddr)
		case "advertise_addr":
			d.addr(f, &c.AdvertiseAddr)
		case "http_addr":
			d.addr(f, &c.HTTPAddr)
		case "join":
			c.Join = d.join(f)
		case "data_dir":
			d.text(f, &c.DataDir)
		case "raft_addr":
			d.addr(f, &c.RaftAddr)
		case "raft_advertise_addr":
			d.addr(f, &c.RaftAdvertiseAddr)
		case "strict_voters":
			if n := d.integer(f); n != nil {
				if err := checkVoters(*n); err != nil {
					d.fail(f.key, f.name, err)
				} else {
					c.StrictVoters = int(*n)
				}
			}
		case "strict_timeout":
			d.setting(f, &c.StrictTimeout)
		case "strict_bootstrap_wait":
			d.setting(f, &c.StrictBootstrapWait)
		case "borrow_timeout":
			d.setting(f, &c.BorrowTimeout)
		case "persist_interval":
			d.setting(f, &c.PersistInterval)
		case "reconnect_interval":
			d.setting(f, &c.ReconnectInterval)
		case "max_keys":
			if n := d.integer(f); n != nil {
				// Any negative number is no bound; a number past an int32
				// (2^31 − 1 keys) is as good as it.
				c.MaxKeys = int(min(max(*n, -1), math.MaxInt32))
			}
		case "tls":
			c.TLS = d.tls(f)
		case "insecure":
			c.Insecure = d.boolean(f)
			insecureKey = f.key
		case "secret_keys":
			c.SecretKeys = d.secretKeys(f)
			hasKeys = hasKeys || !isNull(f.value)
		case "secret_keys_file":
			d.text(f, &c.SecretKeysFile)
			c.secretKeysFileLine, keysFileKey = f.key.Line, f.key
			if c.SecretKeysFile == "" && f.value.Kind == yaml.ScalarNode && f.value.ShortTag() == "!!str" {
				d.fail(f.key, f.name, errors.New("secret_keys_file must not be empty: name a file of base64 keys, or leave the field out"))
			}
		case "gossip_plaintext":
			d.text(f, &c.GossipPlaintext)
			plaintextKey = f.key
			if _, err := cluster.ParseGossipPlaintext(c.GossipPlaintext); err != nil {
				d.fail(f.key, f.name, err)
			}
		case "rules":
			hasRules = true
			c.Rules = d.rules(f)
		}
	}
	if !hasRules {
		d.fail(nil, "rules", errRulesEmpty)
	}
	if c.TLS != nil && c.Insecure {
		d.fail(insecureKey, "insecure", errors.New("insecure: true and tls are both set: insecure serves plaintext, for a node without tls"))
	}
	if hasKeys && c.SecretKeysFile != "" {
		d.fail(keysFileKey, "secret_keys_file", errors.New("secret_keys and secret_keys_file are both set: set one"))
	}
	if p, err := cluster.ParseGossipPlaintext(c.GossipPlaintext); err == nil && p != cluster.PlaintextRefused &&
		!hasKeys && c.SecretKeysFile == "" {
		d.fail(plaintextKey, "gossip_plaintext", fmt.Errorf("gossip_plaintext: %s needs secret_keys or secret_keys_file: "+
			"it says what a node with keys does with plaintext gossip", p))
	}
	return c
}

// tls reads the tls mapping; nil when it is left out (null).
func (d *decoder) tls(f field) *TLS {
	v := f.value
	if v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.wrongType(f, "a mapping of "+strings.Join(tlsFields, ", "))
		return nil
	}
	t := &TLS{}
	given := map[string]bool{}
	for _, tf := range d.fieldsOf(v, tlsLevel) {
		name := strings.TrimPrefix(tf.name, tlsPrefix)
		given[name] = tf.value.Kind != yaml.ScalarNode || tf.value.ShortTag() != nullTag
		switch name {
		case "cert_file":
			d.file(tf, &t.CertFile)
		case "key_file":
			d.file(tf, &t.KeyFile)
		case "peer_ca_file":
			d.file(tf, &t.PeerCAFile)
		case "client_ca_file":
			d.file(tf, &t.ClientCAFile)
		case "require_client_cert":
			t.RequireClientCert = d.boolean(tf)
		}
	}
	for _, r := range []struct{ field, v, what string }{
		{"cert_file", t.CertFile, "the node's certificate (PEM), served to clients and peers and presented to peers"},
		{"key_file", t.KeyFile, "the private key of tls.cert_file (PEM)"},
		{"peer_ca_file", t.PeerCAFile, "the CA certificates (PEM) whose certificates make peers"},
	} {
		if r.v == "" && !given[r.field] {
			d.fail(f.key, tlsPrefix+r.field, fmt.Errorf("%s%s is required: %s", tlsPrefix, r.field, r.what))
		}
	}
	return t
}

// rules reads the rules list, converts every rule and validates it.
func (d *decoder) rules(f field) []Rule {
	v := f.value
	switch {
	case v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag,
		v.Kind == yaml.SequenceNode && len(v.Content) == 0:
		d.fail(f.key, "rules", errRulesEmpty)
		return nil
	case v.Kind == yaml.MappingNode:
		d.fail(v, "rules", fmt.Errorf(`rules must be a list of rules, got %s; start each rule with "- "`, describe(v)))
		return nil
	case v.Kind != yaml.SequenceNode:
		d.wrongType(f, "a list of rules")
		return nil
	}
	out := make([]Rule, 0, len(v.Content))
	names := nameSet{}
	for i, item := range v.Content {
		d.rule = i + 1
		first := len(d.errs)
		m := orSelf(resolve(item), item)
		r, keys := d.ruleOf(m)
		if len(d.errs) == first {
			wr, field, err := convertRule(&r)
			if err == nil {
				field, err = "name", names.claim(i, wr.Name)
			}
			if err != nil {
				at := m
				if k, ok := keys[field]; ok {
					at = k
				}
				d.fail(at, field, err)
			}
		}
		for _, e := range d.errs[first:] {
			e.RuleName = r.Name
		}
		out = append(out, r)
	}
	d.rule = 0
	return out
}

// ruleOf reads one rule, returning it and the key of each field it has.
func (d *decoder) ruleOf(m *yaml.Node) (Rule, map[string]*yaml.Node) {
	var r Rule
	if m.Kind != yaml.MappingNode {
		d.fail(m, "", fmt.Errorf("a rule must be a mapping of fields (%s), got %s",
			strings.Join(ruleFields, ", "), describe(m)))
		return r, nil
	}
	keys := map[string]*yaml.Node{}
	for _, f := range d.fieldsOf(m, ruleLevel) {
		keys[f.name] = f.key
		switch f.name {
		case "name":
			d.text(f, &r.Name)
		case "count":
			r.Count = d.integer(f)
		case "time_window":
			r.TimeWindow = d.number(f, "a number of seconds")
		case "window_type":
			d.text(f, &r.WindowType)
		case "sync_interval":
			r.SyncInterval = d.number(f, "a number of seconds")
		case "allocation":
			d.text(f, &r.Allocation)
		case "fail_mode":
			d.text(f, &r.FailMode)
		case "limits":
			r.Limits = d.limits(f)
		case "shadow":
			r.Shadow = d.boolean(f)
		}
	}
	return r, keys
}

// limits reads a rule's extra limits: a list of mappings of count,
// time_window and window_type.
func (d *decoder) limits(f field) []Limit {
	v := f.value
	if v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.wrongType(f, "a list of limits, each with count, time_window and window_type")
		return nil
	}
	out := make([]Limit, 0, len(v.Content))
	for _, item := range v.Content {
		m := orSelf(resolve(item), item)
		if m.Kind != yaml.MappingNode {
			d.fail(m, "limits", fmt.Errorf("a limit must be a mapping of fields (%s), got %s",
				strings.Join(limitFields, ", "), describe(m)))
			continue
		}
		var l Limit
		for _, lf := range d.fieldsOf(m, limitLevel) {
			switch lf.name {
			case "count":
				l.Count = d.integer(lf)
			case "time_window":
				l.TimeWindow = d.number(lf, "a number of seconds")
			case "window_type":
				d.text(lf, &l.WindowType)
			}
		}
		out = append(out, l)
	}
	return out
}

// boolean reads a true/false field.
func (d *decoder) boolean(f field) bool {
	v := d.scalar(f, "true or false")
	if v == nil {
		return false
	}
	var b bool
	if v.ShortTag() != "!!bool" || v.Decode(&b) != nil {
		d.wrongType(f, "true or false")
		return false
	}
	return b
}

// fieldsOf returns the fields of mapping m, read at level l: its own keys in
// order, then those its merge keys (<<) bring in that it does not set
// itself, the first merged mapping first. It reports keys that are not
// fields at l, duplicate keys and malformed merges, and leaves them out.
func (d *decoder) fieldsOf(m *yaml.Node, l level) []field {
	fk := fieldsKey{m, l}
	if fs, ok := d.fields[fk]; ok {
		return fs
	}
	d.reading[m] = true
	defer delete(d.reading, m)

	var out []field
	var merges []*yaml.Node
	seen := map[string]*yaml.Node{} // key text → the key that has it here
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		kr := orSelf(resolve(k), k)
		if kr.Kind != yaml.ScalarNode {
			d.fail(k, "", fmt.Errorf("a key must be a field name, got %s", describe(kr)))
			continue
		}
		name := kr.Value
		// The fields of tls are named with their mapping: tls.cert_file.
		fname := name
		if l == tlsLevel {
			fname = tlsPrefix + name
		}
		if first, dup := seen[name]; dup {
			d.fail(k, fname, fmt.Errorf("mapping key %q already defined at line %d", name, first.Line))
			continue
		}
		seen[name] = k
		switch {
		case kr.ShortTag() == mergeTag:
			merges = append(merges, v)
		case !slices.Contains(l.fields(), name):
			d.fail(k, fname, l.unknown(name))
		default:
			out = append(out, field{key: k, name: fname, value: orSelf(resolve(v), v)})
		}
	}
	for _, mv := range merges {
		for _, src := range d.mergeSources(mv) {
			if d.reading[src] {
				d.fail(mv, "<<", errors.New("<< must not merge the mapping it is in"))
				continue
			}
			for _, f := range d.fieldsOf(src, l) {
				key := strings.TrimPrefix(f.name, tlsPrefix)
				if l != tlsLevel {
					key = f.name
				}
				if _, set := seen[key]; !set {
					seen[key] = f.key
					out = append(out, f)
				}
			}
		}
	}
	d.fields[fk] = out
	return out
}

// mergeSources returns the mappings a merge key's value v names: one
// mapping, or a list of them.
func (d *decoder) mergeSources(v *yaml.Node) []*yaml.Node {
	r := resolve(v)
	if r != nil && r.Kind == yaml.MappingNode {
		return []*yaml.Node{r}
	}
	if r == nil || r.Kind != yaml.SequenceNode {
		d.fail(v, "<<", fmt.Errorf("<< must be a mapping or a list of mappings, got %s", describe(orSelf(r, v))))
		return nil
	}
	out := make([]*yaml.Node, 0, len(r.Content))
	for _, item := range r.Content {
		m := resolve(item)
		if m == nil || m.Kind != yaml.MappingNode {
			d.fail(item, "<<", fmt.Errorf("<< must be a mapping or a list of mappings, got a list holding %s",
				describe(orSelf(m, item))))
			continue
		}
		out = append(out, m)
	}
	return out
}

// scalar returns f's value when it is a scalar other than null. For null,
// which leaves the field out, it returns nil; for a value that is not a
// scalar it records that the field must be want, and returns nil.
func (d *decoder) scalar(f field, want string) *yaml.Node {
	v := f.value
	if v.Kind != yaml.ScalarNode {
		d.wrongType(f, want)
		return nil
	}
	if v.ShortTag() == nullTag {
		return nil
	}
	return v
}

// text reads a string field into dst.
func (d *decoder) text(f field, dst *string) {
	v := d.scalar(f, "a string")
	if v == nil {
		return
	}
	var s string
	if err := v.Decode(&s); err != nil {
		d.wrongType(f, "a string")
		return
	}
	*dst = s
}

// file reads a file name into dst: a string, not empty.
func (d *decoder) file(f field, dst *string) {
	d.text(f, dst)
	if *dst == "" && f.value.Kind == yaml.ScalarNode && f.value.ShortTag() == "!!str" {
		d.fail(f.key, f.name, fmt.Errorf("%s must not be empty: name a PEM file, or leave the field out", f.name))
	}
}

// addr reads a HOST:PORT field into dst.
func (d *decoder) addr(f field, dst *string) {
	d.text(f, dst)
	if *dst == "" {
		return
	}
	if err := cluster.CheckHostPort(f.name, *dst); err != nil {
		d.fail(f.key, f.name, err)
	}
}

// setting reads a node setting in seconds into dst.
func (d *decoder) setting(f field, dst *float64) {
	s := d.number(f, "a number of seconds")
	if s == nil {
		return
	}
	if err := checkSetting(f.name, *s); err != nil {
		d.fail(f.key, f.name, err)
		return
	}
	*dst = *s
}

// number reads a number field; nil when left out or not a number.
func (d *decoder) number(f field, want string) *float64 {
	v := d.scalar(f, want)
	if v == nil {
		return nil
	}
	var x float64
	if err := v.Decode(&x); err != nil {
		d.wrongType(f, want)
		return nil
	}
	return &x
}

// integer reads a whole-number field; nil when left out or not a whole
// number. A float with no fraction (1e3) is whole; 1.5 is not, where a
// YAML decoder into an integer would cut it to 1.
func (d *decoder) integer(f field) *int64 {
	v := d.scalar(f, "an integer")
	if v == nil {
		return nil
	}
	var n int64
	switch v.ShortTag() {
	case intTag:
		if err := v.Decode(&n); err != nil {
			// A YAML integer that is no int64 is one past its range,
			// unless its text is no integer at all (!!int x).
			var u uint64
			if v.Decode(&u) == nil {
				d.fail(v, f.name, fmt.Errorf("%s is out of range, got %s", f.name, describe(v)))
			} else {
				d.wrongType(f, "an integer")
			}
			return nil
		}
	case floatTag:
		var x float64
		if err := v.Decode(&x); err != nil || math.IsNaN(x) || x != math.Trunc(x) {
			d.wrongType(f, "an integer")
			return nil
		}
		if x >= 1<<63 || x < -(1<<63) {
			d.fail(v, f.name, fmt.Errorf("%s is out of range, got %s", f.name, describe(v)))
			return nil
		}
		n = int64(x)
	default:
		d.wrongType(f, "an integer")
		return nil
	}
	return &n
}

// join reads the join list.
func (d *decoder) join(f field) []string {
	v := f.value
	if v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.wrongType(f, "a list of HOST:PORT strings")
		return nil
	}
	out := make([]string, 0, len(v.Content))
	for i, item := range v.Content {
		it := orSelf(resolve(item), item)
		var s string
		if it.Kind != yaml.ScalarNode || it.Decode(&s) != nil {
			d.fail(it, "join", fmt.Errorf("join[%d] must be a HOST:PORT string, got %s", i, describe(it)))
			continue
		}
		if err := checkJoin(i, s); err != nil {
			d.fail(it, "join", err)
		}
		out = append(out, s)
	}
	return out
}

// resolve follows document and alias nodes to the value they stand for;
// nil when there is none.
func resolve(n *yaml.Node) *yaml.Node {
	// An alias can name another alias's anchor only once it is defined, so
	// chains end; the bound is for documents built in code.
	for range 100 {
		switch {
		case n == nil:
			return nil
		case n.Kind == yaml.DocumentNode:
			if len(n.Content) == 0 {
				return nil
			}
			n = n.Content[0]
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		default:
			return n
		}
	}
	return nil
}

// isNull reports whether v is null: a field left out.
func isNull(v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag }

// orSelf is r, or n when r is nil.
func orSelf(r, n *yaml.Node) *yaml.Node {
	if r == nil {
		return n
	}
	return r
}

// describe says what a node holds for an error: its tag, and a scalar's
// text, e.g. !!str `10s`.
func describe(n *yaml.Node) string {
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || tag == nullTag {
		return tag
	}
	v := n.Value
	if utf8.RuneCountInString(v) > 40 {
		v = string([]rune(v)[:37]) + "..."
	}
	if v != "" && strconv.CanBackquote(v) {
		return tag + " `" + v + "`"
	}
	return tag + " " + strconv.Quote(v)
}
