package envoyrls

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/cluster/internal/regularfile"
	"github.com/sluicehq/sluice/window"
)

// MaxSize is the largest config file Load reads, in bytes.
const MaxSize = 4 << 20

// Domain is one ratelimit config file, read and checked: its domain, its
// descriptor tree, and the sluice rules its counted limits became.
type Domain struct {
	// Name is the file's domain, which requests name.
	Name string
	// Path is the file the domain was read from, for messages.
	Path string

	root  *tree
	rules []window.Rule
	// origins says, for each rule name, where in the file the limit is.
	origins map[string]origin
}

// origin is where a limit is written: for messages about its rule.
type origin struct {
	line       int
	descriptor string
}

// Rules returns the sluice rules of the domain's counted limits (not those
// with unlimited: true or requests_per_unit: 0, which need no counting), in
// the order of the file.
func (d *Domain) Rules() []window.Rule { return append([]window.Rule(nil), d.rules...) }

// Load reads and parses the ratelimit config file at path (see Parse).
func Load(path string) (*Domain, error) {
	data, err := regularfile.Read(path, MaxSize)
	if errors.Is(err, regularfile.ErrTooLarge) {
		return nil, &Error{Path: path, Err: fmt.Errorf("file is larger than %d bytes", MaxSize)}
	}
	if err != nil {
		return nil, fmt.Errorf("envoy config: %w", err)
	}
	return Parse(path, data)
}

// Parse parses one envoyproxy/ratelimit config file; path names it in
// errors. The format is envoyproxy/ratelimit's:
//
//	domain: edge
//	descriptors:
//	  - key: remote_address        # any value: a limit per address
//	    rate_limit: {unit: second, requests_per_unit: 10}
//	  - key: remote_address
//	    value: 50.0.0.5            # this address only; "*" is a wildcard
//	    rate_limit: {unit: second, requests_per_unit: 0}
//
// with window_type (default fixed, as envoyproxy/ratelimit counts),
// sync_interval, allocation and fail_mode allowed on a descriptor or in its
// rate_limit. It rejects unknown and duplicate fields, values of the wrong
// type, limits envoyproxy/ratelimit rejects, sibling descriptors with the
// same key and value, and fields it does not implement when set
// (quota_mode: true). Anchors, aliases and merge keys (<<) are followed.
// Errors are *Error (joined with errors.Join when there are several, in
// the order of the file) naming the file, line, domain, descriptor and
// field.
func Parse(path string, data []byte) (dom *Domain, err error) {
	defer func() {
		// The YAML parser is third-party code; a panic on hostile input
		// must not take the process down.
		if r := recover(); r != nil {
			dom, err = nil, &Error{Path: path, Err: fmt.Errorf("malformed YAML: %v", r)}
		}
	}()
	if err := checkText(path, data); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Path: path, Field: "domain", Err: errors.New("the file is empty; a config needs a domain")}
		}
		return nil, &Error{Path: path, Err: err}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, &Error{Path: path, Err: err}
	default:
		return nil, &Error{Path: path, Line: extra.Line,
			Err: errors.New("more than one YAML document; a config file holds one domain")}
	}
	d := newDecoder(path)
	dom = d.readDomain(&doc)
	if err := d.err(); err != nil {
		return nil, err
	}
	return dom, nil
}
