package envoyrls

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
)

// Tags the decoder tells apart.
const (
	nullTag  = "!!null"
	boolTag  = "!!bool"
	intTag   = "!!int"
	floatTag = "!!float"
	mergeTag = "!!merge"
)

// The fields of each mapping, in the order the messages list them. Those
// of envoyproxy/ratelimit come first, then sluice's.
var (
	topFields        = []string{"domain", "descriptors"}
	sluiceFields     = []string{"window_type", "sync_interval", "allocation", "fail_mode"}
	descriptorFields = append([]string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode",
		"detailed_metric", "value_to_metric", "share_threshold", "metadata"}, sluiceFields...)
	rateLimitFields = append([]string{"unit", "requests_per_unit", "unlimited", "name", "replaces"}, sluiceFields...)
	replacesFields  = []string{"name"}
)

// maxDepth bounds how deep descriptors nest, so that a hostile file cannot
// exhaust the stack; maxDescriptors bounds how many a file holds, aliases
// expanded, so that a few aliases cannot make billions (a file of MaxSize
// holds fewer as plain text).
const (
	maxDepth       = 64
	maxDescriptors = 100_000
)

// unknown is the error for a key that is not one of fields. A key that is
// a field of the descriptor written in its rate_limit, or the other way
// round, was likely written at the wrong depth; say so.
func unknown(key string, fields []string) error {
	msg := fmt.Sprintf("unknown field %q (known fields: %s)", key, strings.Join(fields, ", "))
	inDescriptor := slices.Contains(descriptorFields, key)
	inRateLimit := slices.Contains(rateLimitFields, key)
	switch {
	case &fields[0] == &rateLimitFields[0] && inDescriptor:
		msg += fmt.Sprintf("; %s is a field of the descriptor: write it beside rate_limit", key)
	case &fields[0] == &descriptorFields[0] && inRateLimit:
		msg += fmt.Sprintf("; %s is a field of rate_limit: write it inside the descriptor's rate_limit", key)
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

// fieldsKey names a mapping read with a set of fields.
type fieldsKey struct {
	m      *yaml.Node
	fields *string
}

// decoder walks a parsed ratelimit config and builds its Domain, recording
// each problem with the line of the node it is about.
type decoder struct {
	path string
	// domainName is the file's domain, once read.
	domainName string
	errs       []*Error
	// descPath is the path of the descriptor being read; "" outside.
	descPath string
	// fields holds the fields of every mapping read so far, so that a
	// mapping merged or aliased many times is read, and its problems
	// reported, once.
	fields map[fieldsKey][]field
	// reading marks the mappings whose fields are being gathered, to catch
	// a mapping that merges itself.
	reading map[*yaml.Node]bool
	// dom is the domain being built.
	dom *Domain
	// count is the descriptors read so far; open marks the descriptor
	// mappings being read, to catch one that holds itself by an alias.
	count int
	open  map[*yaml.Node]bool
}

func newDecoder(path string) *decoder {
	return &decoder{path: path, fields: map[fieldsKey][]field{}, reading: map[*yaml.Node]bool{},
		open: map[*yaml.Node]bool{}}
}

// fail records a problem with field (empty for none) at n's line.
func (d *decoder) fail(n *yaml.Node, field string, err error) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &Error{Path: d.path, Line: line, Domain: d.domainName, Descriptor: d.descPath,
		Field: field, Err: err})
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

// readDomain reads the document: a domain and its descriptors.
func (d *decoder) readDomain(doc *yaml.Node) *Domain {
	d.dom = &Domain{Path: d.path, root: newTree("", "", ""), origins: map[string]origin{}}
	root := resolve(doc)
	switch {
	case root == nil || root.Kind == yaml.ScalarNode && root.ShortTag() == nullTag:
		d.fail(doc, "domain", errors.New("the document is empty; a config needs a domain"))
		return d.dom
	case root.Kind != yaml.MappingNode:
		d.fail(root, "", fmt.Errorf("the config must be a mapping of fields (%s), got %s",
			strings.Join(topFields, ", "), describe(root)))
		return d.dom
	}
	fields := d.fieldsOf(root, topFields)
	// The domain first, wherever it is written: every message names it.
	var descriptors *field
	hasDomain := false
	for _, f := range fields {
		switch f.name {
		case "domain":
			hasDomain = true
			d.text(f, &d.dom.Name)
			if d.dom.Name == "" && f.value.Kind == yaml.ScalarNode {
				d.fail(f.key, "domain", errors.New("domain must not be empty"))
			}
		case "descriptors":
			descriptors = &f
		}
	}
	if !hasDomain {
		d.fail(root, "domain", errors.New("domain is required: the name requests give in their domain field"))
	}
	d.domainName = d.dom.Name
	for _, e := range d.errs {
		// Found before the domain that names them.
		e.Domain = d.domainName
	}
	if descriptors != nil {
		d.descriptors(*descriptors, d.dom.root, 1)
	}
	return d.dom
}

// descriptors reads a descriptors list into parent's children.
func (d *decoder) descriptors(f field, parent *tree, depth int) {
	v := f.value
	switch {
	case v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag:
		return
	case v.Kind != yaml.SequenceNode:
		d.wrongType(f, "a list of descriptors")
		return
	case depth > maxDepth:
		d.fail(f.key, "descriptors", fmt.Errorf("descriptors nest more than %d deep", maxDepth))
		return
	}
	for _, item := range v.Content {
		m := orSelf(resolve(item), item)
		switch {
		case m.Kind != yaml.MappingNode:
			d.fail(m, "", fmt.Errorf("a descriptor must be a mapping of fields (%s), got %s",
				strings.Join(descriptorFields, ", "), describe(m)))
			continue
		case d.open[m]:
			d.fail(item, "descriptors", errors.New("a descriptor must not hold itself (by an alias)"))
			continue
		case d.count >= maxDescriptors:
			d.fail(item, "descriptors", fmt.Errorf("more than %d descriptors, aliases expanded", maxDescriptors))
			return
		}
		d.count++
		d.open[m] = true
		d.readDescriptor(m, parent, depth)
		delete(d.open, m)
	}
}

// settings are sluice's fields of a limit, as the file spells them, each
// with the key that set it (nil when left out).
type settings struct {
	windowType, allocation, failMode string
	syncInterval                     *float64
	keys                             map[string]*yaml.Node
}

// readDescriptor reads one descriptor, its limit and its nested descriptors.
func (d *decoder) readDescriptor(m *yaml.Node, parent *tree, depth int) {
	first := len(d.errs)
	fields := d.fieldsOf(m, descriptorFields)
	var key, value string
	var keyNode *yaml.Node
	for _, f := range fields {
		switch f.name {
		case "key":
			keyNode = f.key
			d.text(f, &key)
		case "value":
			d.text(f, &value)
		}
	}
	outer := d.descPath
	defer func() { d.descPath = outer }()
	path := segment(key, value)
	if parent.path != "" {
		path = parent.path + "." + path
	}
	d.descPath = path
	for _, e := range d.errs[first:] {
		// Found before the key and value that name the descriptor.
		e.Descriptor = path
	}
	if key == "" {
		at := m
		if keyNode != nil {
			at = keyNode
		}
		d.fail(at, "key", errors.New("key must not be empty"))
		return
	}
	t := newTree(key, value, path)
	if parent.child(key, value) != nil {
		d.fail(keyNode, "key", fmt.Errorf("duplicate descriptor composite key '%s.%s'", d.domainName, path))
		return
	}
	parent.add(t)

	var rl, nested *field
	var shadow bool
	own := settings{keys: map[string]*yaml.Node{}}
	for _, f := range fields {
		switch f.name {
		case "rate_limit":
			rl = &f
		case "descriptors":
			nested = &f
		case "shadow_mode":
			d.boolean(f, &shadow)
		case "detailed_metric", "value_to_metric":
			// What envoyproxy/ratelimit names its stats; sluice keeps no
			// stats per descriptor.
			var b bool
			d.boolean(f, &b)
		case "quota_mode":
			var b bool
			if d.boolean(f, &b) && b {
				d.fail(f.key, f.name, errors.New("quota_mode: true is not supported by sluice; remove it, or set it to false"))
			}
		case "share_threshold":
			if d.boolean(f, &t.share) && t.share && t.parts == nil {
				d.fail(f.key, f.name, fmt.Errorf("share_threshold can only be used with a wildcard value (containing '*'), got value %q", value))
			}
		case "metadata":
			// Response dynamic metadata, which envoyproxy/ratelimit sends
			// only when asked to (RESPONSE_DYNAMIC_METADATA); sluice does
			// not send it.
			if v := f.value; v.Kind != yaml.MappingNode && !(v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag) {
				d.wrongType(f, "a mapping")
			}
		case "window_type", "sync_interval", "allocation", "fail_mode":
			d.setting(f, &own)
		}
	}
	switch {
	case rl != nil:
		d.rateLimit(*rl, t, shadow, own)
	case len(own.keys) > 0:
		for _, name := range sluiceFields {
			if k := own.keys[name]; k != nil {
				d.fail(k, name, fmt.Errorf("%s needs a rate_limit on this descriptor", name))
			}
		}
	}
	if nested != nil {
		d.descriptors(*nested, t, depth+1)
	}
}

// setting reads one of sluice's fields into s.
func (d *decoder) setting(f field, s *settings) {
	s.keys[f.name] = f.key
	switch f.name {
	case "window_type":
		d.text(f, &s.windowType)
	case "allocation":
		d.text(f, &s.allocation)
	case "fail_mode":
		d.text(f, &s.failMode)
	case "sync_interval":
		s.syncInterval = d.number(f, "a number of seconds")
	}
}

// rateLimit reads a descriptor's rate_limit into t.limit, and makes its
// sluice rule. desc holds the sluice fields written on the descriptor.
func (d *decoder) rateLimit(f field, t *tree, shadow bool, desc settings) {
	m := f.value
	if m.Kind != yaml.MappingNode {
		d.wrongType(f, "a mapping of fields ("+strings.Join(rateLimitFields, ", ")+")")
		return
	}
	first := len(d.errs)
	l := &limit{shadow: shadow, descriptor: t.path}
	var unit string
	var unitKey *yaml.Node
	var perUnit *int64
	own := settings{keys: map[string]*yaml.Node{}}
	for _, f := range d.fieldsOf(m, rateLimitFields) {
		switch f.name {
		case "unit":
			unitKey = f.key
			d.text(f, &unit)
		case "requests_per_unit":
			perUnit = d.integer(f)
			if perUnit != nil && (*perUnit < 0 || *perUnit > math.MaxUint32) {
				d.fail(f.value, f.name, fmt.Errorf("requests_per_unit must be 0 … %d, got %d", uint32(math.MaxUint32), *perUnit))
				perUnit = nil
			}
		case "unlimited":
			d.boolean(f, &l.unlimited)
		case "name":
			d.text(f, &l.name)
		case "replaces":
			l.replaces = d.replaces(f)
		case "window_type", "sync_interval", "allocation", "fail_mode":
			d.setting(f, &own)
		}
	}
	for _, name := range sluiceFields {
		if k := own.keys[name]; k != nil && desc.keys[name] != nil {
			d.fail(k, name, fmt.Errorf("%s is set on the descriptor (line %d) and in its rate_limit; set it once",
				name, desc.keys[name].Line))
		}
	}
	s := merge(desc, own)
	for i, r := range l.replaces {
		if r != "" && r == l.name {
			d.fail(m, "replaces", fmt.Errorf("replaces[%d] names this rate_limit's own name %q", i, r))
		}
	}
	if l.unlimited {
		if unitKey != nil {
			d.fail(unitKey, "unit", errors.New("unit must not be set when unlimited is true"))
		}
		for _, name := range sluiceFields {
			if k := s.keys[name]; k != nil {
				d.fail(k, name, fmt.Errorf("%s has no meaning when unlimited is true: nothing is counted", name))
			}
		}
	} else {
		u, ok := parseUnit(unit)
		switch {
		case unitKey == nil && len(d.errs) == first:
			d.fail(m, "unit", fmt.Errorf("unit is required: one of %s", unitNames))
		case unitKey == nil:
		case !ok:
			d.fail(unitKey, "unit", fmt.Errorf("unit must be one of %s, got %q", unitNames, unit))
		}
		if perUnit == nil && len(d.errs) == first {
			d.fail(m, "requests_per_unit", errors.New("requests_per_unit is required: requests allowed per unit (0 refuses every request)"))
		}
		if ok && perUnit != nil {
			l.unit, l.window, l.perUnit = u, unitLength(u), uint32(*perUnit)
		}
	}
	if len(d.errs) > first {
		return
	}
	t.limit = l
	if l.unlimited || l.perUnit == 0 {
		// Nothing to count: always admitted, or always refused. The
		// settings are still checked, so that a typo fails now.
		d.rule(m, l, s, false)
		return
	}
	d.rule(m, l, s, true)
}

// merge is the sluice fields of a descriptor and of its rate_limit
// together; the decoder has reported a field set in both.
func merge(a, b settings) settings {
	out := settings{keys: map[string]*yaml.Node{}}
	for _, s := range []settings{a, b} {
		for k, v := range s.keys {
			out.keys[k] = v
		}
		if s.windowType != "" {
			out.windowType = s.windowType
		}
		if s.allocation != "" {
			out.allocation = s.allocation
		}
		if s.failMode != "" {
			out.failMode = s.failMode
		}
		if s.syncInterval != nil {
			out.syncInterval = s.syncInterval
		}
	}
	return out
}

// replaces reads rate_limit's replaces list: mappings with a name.
func (d *decoder) replaces(f field) []string {
	v := f.value
	if v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.wrongType(f, "a list of {name: NAME}")
		return nil
	}
	var out []string
	for i, item := range v.Content {
		m := orSelf(resolve(item), item)
		if m.Kind != yaml.MappingNode {
			d.fail(m, "replaces", fmt.Errorf("replaces[%d] must be a mapping with a name, got %s", i, describe(m)))
			continue
		}
		var name string
		for _, f := range d.fieldsOf(m, replacesFields) {
			d.text(f, &name)
		}
		if name == "" {
			d.fail(m, "replaces", fmt.Errorf("replaces[%d] must have a name that is not empty", i))
			continue
		}
		out = append(out, name)
	}
	return out
}

// fieldsOf returns the fields of mapping m, which may hold the keys in
// fields: its own keys in order, then those its merge keys (<<) bring in
// that it does not set itself, the first merged mapping first. It reports
// keys that are not fields, duplicate keys and malformed merges, and leaves
// them out.
func (d *decoder) fieldsOf(m *yaml.Node, fields []string) []field {
	fk := fieldsKey{m, &fields[0]}
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
		if first, dup := seen[name]; dup {
			d.fail(k, name, fmt.Errorf("mapping key %q already defined at line %d", name, first.Line))
			continue
		}
		seen[name] = k
		switch {
		case kr.ShortTag() == mergeTag:
			merges = append(merges, v)
		case !slices.Contains(fields, name):
			d.fail(k, name, unknown(name, fields))
		default:
			out = append(out, field{key: k, name: name, value: orSelf(resolve(v), v)})
		}
	}
	for _, mv := range merges {
		for _, src := range d.mergeSources(mv) {
			if d.reading[src] {
				d.fail(mv, "<<", errors.New("<< must not merge the mapping it is in"))
				continue
			}
			for _, f := range d.fieldsOf(src, fields) {
				if _, set := seen[f.name]; !set {
					seen[f.name] = f.key
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

// text reads a string field into dst. Any scalar is text, as written:
// value: 8080 is the value "8080".
func (d *decoder) text(f field, dst *string) {
	v := d.scalar(f, "a string")
	if v == nil {
		return
	}
	*dst = v.Value
}

// yaml11Bools are the YAML 1.1 spellings of true and false beyond true and
// false themselves, which envoyproxy/ratelimit's YAML parser reads as
// booleans.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// boolean reads a true/false field into dst, reporting whether it was set.
func (d *decoder) boolean(f field, dst *bool) bool {
	v := d.scalar(f, "true or false")
	if v == nil {
		return false
	}
	if v.ShortTag() == boolTag {
		var b bool
		if err := v.Decode(&b); err == nil {
			*dst = b
			return true
		}
	}
	if b, ok := yaml11Bools[v.Value]; ok && v.Style == 0 {
		*dst = b
		return true
	}
	d.wrongType(f, "true or false")
	return false
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
// number. A float with no fraction (1e3) is whole; 1.5 is not.
func (d *decoder) integer(f field) *int64 {
	v := d.scalar(f, "an integer")
	if v == nil {
		return nil
	}
	var n int64
	switch v.ShortTag() {
	case intTag:
		if err := v.Decode(&n); err != nil {
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
