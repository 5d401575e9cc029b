package envoyrls

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/window"
)

// Limits are the domains a Server answers for, each from its own file.
type Limits struct {
	domains map[string]*Domain
	// order is the domains in the order given, for Rules.
	order []*Domain
}

// NewLimits joins domains, one per file. Two files with the same domain
// are an error naming both (envoyproxy/ratelimit rejects them too, unless
// told to merge), and so are two limits whose rule names meet (domain "a"
// with key "b.c" and domain "a.b" with key "c").
func NewLimits(domains ...*Domain) (*Limits, error) {
	l := &Limits{domains: map[string]*Domain{}}
	owners := map[string]*Domain{} // rule name → the domain that has it
	var errs []error
	for _, d := range domains {
		if first, dup := l.domains[d.Name]; dup {
			errs = append(errs, &Error{Path: d.Path, Field: "domain",
				Err: fmt.Errorf("domain %q is also the domain of %s; one file per domain", d.Name, first.Path)})
			continue
		}
		l.domains[d.Name] = d
		l.order = append(l.order, d)
		for _, r := range d.rules {
			if other, dup := owners[r.Name]; dup {
				o := d.origins[r.Name]
				errs = append(errs, &Error{Path: d.Path, Line: o.line, Domain: d.Name, Descriptor: o.descriptor,
					Err: fmt.Errorf("rule name %q is also that of a limit of domain %q in %s", r.Name, other.Name, other.Path)})
				continue
			}
			owners[r.Name] = d
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return l, nil
}

// Rules returns the rules of every domain, in the order NewLimits was
// given them.
func (l *Limits) Rules() []window.Rule {
	var out []window.Rule
	for _, d := range l.order {
		out = append(out, d.rules...)
	}
	return out
}

// AddTo returns rules followed by every domain's rules, for a node that
// enforces both: a limit whose rule has the name of one of rules is an
// error naming the limit and from, where rules come from (e.g. the
// agent's config file).
func (l *Limits) AddTo(rules []window.Rule, from string) ([]window.Rule, error) {
	names := map[string]bool{}
	for _, r := range rules {
		names[r.Name] = true
	}
	out := append([]window.Rule(nil), rules...)
	var errs []error
	for _, d := range l.order {
		for _, r := range d.rules {
			if names[r.Name] {
				o := d.origins[r.Name]
				errs = append(errs, &Error{Path: d.Path, Line: o.line, Domain: d.Name, Descriptor: o.descriptor,
					Err: fmt.Errorf("rule name %q is also that of a rule in %s; rename one", r.Name, from)})
				continue
			}
			out = append(out, r)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
