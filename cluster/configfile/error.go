package configfile

import (
	"fmt"
	"strings"
)

// Error is a problem in a config file: the file, the line when known, the
// rule when the problem is in one, and the field.
type Error struct {
	// Path is the file name; empty when the config did not come from a file.
	Path string
	// Line is the 1-based line in the file, or 0 when unknown (a config
	// built in code, a field the file leaves out, or a YAML syntax error,
	// whose own text says where the parser stopped).
	Line int
	// Rule is the 1-based position of the rule in the rules list, or 0 when
	// the problem is not in a rule.
	Rule int
	// RuleName is the rule's name, when it has one.
	RuleName string
	// Field is the file's name of the offending field, e.g. "count"; empty
	// for a problem with the file or a rule as a whole.
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
func (e *Error) Unwrap() error { return e.Err }
