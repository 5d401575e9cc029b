package envoyrls

import (
	"fmt"
	"strings"
)

// Error is a problem in a ratelimit config file: the file, the line when
// known, the domain, the descriptor when the problem is in one, and the
// field.
type Error struct {
	// Path is the file name; empty when the config did not come from a file.
	Path string
	// Line is the 1-based line in the file, or 0 when unknown (a field the
	// file leaves out, or a YAML syntax error, whose own text says where
	// the parser stopped).
	Line int
	// Domain is the file's domain, when it is known.
	Domain string
	// Descriptor is the descriptor's path as envoyproxy/ratelimit names it,
	// key_value segments joined by dots (e.g. "message_type_marketing.to_number");
	// empty for a problem outside the descriptors.
	Descriptor string
	// Field is the file's name of the offending field, e.g.
	// "requests_per_unit"; empty for a problem with the file or a
	// descriptor as a whole.
	Field string
	// Err says what is wrong; its text names the field.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Path != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.Path, e.Line)
	case e.Path != "":
		b.WriteString(e.Path + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Domain != "" {
		fmt.Fprintf(&b, "domain %q: ", e.Domain)
	}
	if e.Descriptor != "" {
		fmt.Fprintf(&b, "descriptor %q: ", e.Descriptor)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying problem, e.g. a *window.FieldError.
func (e *Error) Unwrap() error { return e.Err }
