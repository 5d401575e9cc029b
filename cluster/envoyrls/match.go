package envoyrls

import (
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// tree is one descriptor of a domain's config; the domain is the root,
// with no key.
type tree struct {
	key, value string
	// path names the descriptor as envoyproxy/ratelimit does:
	// key_value.key, from the top; "" at the root.
	path string
	// parts is value split at each '*', for a wildcard value; nil
	// otherwise.
	parts []string
	// share is share_threshold: every value the wildcard matches counts
	// under the pattern.
	share bool
	// limit is the descriptor's rate_limit; nil without one.
	limit *limit

	// exact holds the children with a value (wildcards too: a request
	// value that is the pattern itself matches it as written), wild the
	// children whose value holds a '*', in the order of the file, and any
	// those with a key and no value.
	exact map[entry]*tree
	wild  []*tree
	any   map[string]*tree
}

// entry is a descriptor entry: a key and a value.
type entry struct{ key, value string }

func newTree(key, value, path string) *tree {
	t := &tree{key: key, value: value, path: path}
	if strings.Contains(value, "*") {
		t.parts = strings.Split(value, "*")
	}
	return t
}

// hasChildren reports whether the descriptor has nested descriptors.
func (t *tree) hasChildren() bool { return len(t.exact) > 0 || len(t.any) > 0 }

// child returns t's child with key and value, or nil.
func (t *tree) child(key, value string) *tree {
	if value == "" {
		return t.any[key]
	}
	return t.exact[entry{key, value}]
}

// add makes c a child of t.
func (t *tree) add(c *tree) {
	if c.value == "" {
		if t.any == nil {
			t.any = map[string]*tree{}
		}
		t.any[c.key] = c
		return
	}
	if t.exact == nil {
		t.exact = map[entry]*tree{}
	}
	t.exact[entry{c.key, c.value}] = c
	if c.parts != nil {
		t.wild = append(t.wild, c)
	}
}

// limit is a descriptor's rate_limit.
type limit struct {
	// rule is the sluice rule that counts it; "" for a limit that counts
	// nothing (unlimited, or requests_per_unit 0).
	rule string
	// unlimited: true always admits.
	unlimited bool
	// perUnit and unit are the limit as the file states it; window is the
	// unit's length and fixed whether the rule's window is fixed.
	perUnit uint32
	unit    rlsv3.RateLimitResponse_RateLimit_Unit
	window  time.Duration
	fixed   bool
	// shadow is shadow_mode: the limit is counted and reported, never
	// enforced.
	shadow bool
	// name and replaces are rate_limit's name and replaces[].name.
	name     string
	replaces []string
	// descriptor is the descriptor's path, for logs.
	descriptor string
}

// match walks a domain's tree along a request descriptor's entries as
// envoyproxy/ratelimit does: at each level an entry matches the child with
// its key and value, else the first wildcard child (in the order of the
// file) with its key whose pattern matches the value, else the child with
// its key and no value. The limit that applies is that of the descriptor
// the last entry matched, if it has one: a request with more or fewer
// entries than a limit's depth does not reach it. It returns nil when no
// limit applies, and the sluice key to count under.
func (t *tree) match(entries []*ratelimitv3.RateLimitDescriptor_Entry) (*limit, string) {
	if t == nil || len(entries) == 0 {
		return nil, ""
	}
	matched := make([]*tree, len(entries))
	at := t
	for i, e := range entries {
		if i > 0 && !at.hasChildren() {
			return nil, ""
		}
		key, value := e.GetKey(), e.GetValue()
		var next *tree
		if value != "" {
			next = at.exact[entry{key, value}]
		}
		if next == nil {
			for _, w := range at.wild {
				if w.key == key && wildcardMatch(w.parts, value) {
					next = w
					break
				}
			}
		}
		if next == nil {
			next = at.any[key]
		}
		if next == nil {
			return nil, ""
		}
		matched[i] = next
		at = next
	}
	if at.limit == nil {
		return nil, ""
	}
	return at.limit, checkKey(entries, matched)
}

// wildcardMatch reports whether value matches a pattern split at each '*'
// (each '*' matching any run of bytes, empty too), as envoyproxy/ratelimit
// matches.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
