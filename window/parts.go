package window

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PartSep separates a rule's name from the number of one of its extra
// limits in the name of that limit's part ("api#2"). Rule names cannot hold
// it, so no part is ever mistaken for a rule.
const PartSep = "#"

// Equal reports whether r and o are the same rule, field for field.
func (r Rule) Equal(o Rule) bool {
	return r.Name == o.Name && r.Count == o.Count && r.Window == o.Window && r.Type == o.Type &&
		r.SyncInterval == o.SyncInterval && r.Allocation == o.Allocation && r.FailMode == o.FailMode &&
		r.Shadow == o.Shadow && slices.Equal(r.Also, o.Also)
}

// Parts returns the rules the counters enforce for r: r itself with its
// first limit and no others, then one rule per limit of Also, named
// r.Name#2, #3 and on, with r's other fields. A check under r is one under
// every part, all or nothing.
func (r Rule) Parts() []Rule {
	first := r
	first.Also = nil
	out := []Rule{first}
	for i, l := range r.Also {
		p := first
		p.Name = r.Name + PartSep + strconv.Itoa(i+2)
		p.Count, p.Window, p.Type = l.Count, l.Window, l.Type
		out = append(out, p)
	}
	return out
}

// AllParts returns every rule's parts, in order (see Rule.Parts).
func AllParts(rules []Rule) []Rule {
	out := make([]Rule, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.Parts()...)
	}
	return out
}

// PartOf returns the name of the rule a part belongs to, and whether name
// is that of an extra limit's part at all.
func PartOf(name string) (string, bool) {
	i := strings.Index(name, PartSep)
	if i < 0 {
		return name, false
	}
	return name[:i], true
}

// validateAlso checks each extra limit as a rule of its own, naming it.
func (r *Rule) validateAlso() error {
	for i, p := range r.Parts()[1:] {
		p.Name = r.Name // the part's own name holds the separator names may not
		if err := p.Validate(); err != nil {
			return fmt.Errorf("limits[%d]: %w", i+1, err)
		}
		for j, q := range r.Also[:i] {
			if q.Window == r.Also[i].Window && q.Type == r.Also[i].Type {
				return fieldErr(fmt.Sprintf("limits[%d]", i+1), "repeats the window of limits[%d] (%v %v)", j+1, q.Window, q.Type)
			}
		}
		if r.Also[i].Window == r.Window && r.Also[i].Type == r.Type {
			return fieldErr(fmt.Sprintf("limits[%d]", i+1), "repeats the rule's first window (%v %v)", r.Window, r.Type)
		}
	}
	return nil
}
