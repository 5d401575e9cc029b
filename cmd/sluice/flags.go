package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// Every flag is written with two dashes, --name VALUE, in usage lines, in
// the flag listings, in error messages and in the README; Go's flag package
// accepts both -name and --name, but prints one dash, so sluice prints its
// flags and rewrites the package's errors itself.

// parseFlags parses args into fs, which prints nothing itself: -h prints the
// usage to stdout and returns flag.ErrHelp; a bad flag or a stray argument
// returns a usageError that names the flag as --name, and suggests the flag
// meant when one is not defined.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return flag.ErrHelp
	}
	if err != nil {
		return usageError{flagError(fs, err)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// The flag package's error messages, which it builds with fmt and returns
// untyped: flagError rewrites them to name flags as --name.
var (
	flagNotDefined = regexp.MustCompile(`(?s)^flag provided but not defined: -(.*)$`)
	flagBadValue   = regexp.MustCompile(`(?s)^invalid value (".*") for flag -([^:]*): (.*)$`)
	flagBadBool    = regexp.MustCompile(`(?s)^invalid boolean value (".*") for -([^:]*): (.*)$`)
	flagNoValue    = regexp.MustCompile(`(?s)^flag needs an argument: -(.*)$`)
)

// flagError rewrites an error of fs.Parse in sluice's words: an undefined
// flag is "unknown flag --nme; did you mean --name?", a bad value names the
// flag as --name. The message is one line whatever the command line held.
func flagError(fs *flag.FlagSet, err error) error {
	return errors.New(oneLine(rewordFlagError(fs, err).Error()))
}

// rewordFlagError is flagError before it is made one line.
func rewordFlagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if m := flagNotDefined.FindStringSubmatch(msg); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s, ok := suggest(m[1], names); ok {
			return fmt.Errorf("unknown flag --%s; did you mean --%s?", m[1], s)
		}
		return fmt.Errorf("unknown flag --%s", m[1])
	}
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		why := m[3]
		if f := fs.Lookup(m[2]); f != nil && why == "parse error" {
			// The flag package says no more than that; say what it wants.
			switch kind, _ := flag.UnquoteUsage(f); kind {
			case "int", "uint":
				why = "want a whole number"
			case "float":
				why = "want a number"
			case "duration":
				why = "want a duration such as 2s or 500ms"
			}
		}
		return fmt.Errorf("invalid value %s for --%s: %s", m[1], m[2], why)
	}
	if m := flagBadBool.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("invalid value %s for --%s: want true or false", m[1], m[2])
	}
	if m := flagNoValue.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("--%s needs a value", m[1])
	}
	return err
}

// printFlags lists fs's flags, sorted by name, on fs.Output() as
// flag.PrintDefaults does, but each as --name VALUE: the spelling of the
// usage lines.
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		placeholder, usage := flagPlaceholder(f)
		line := "  --" + f.Name
		if placeholder != "" {
			line += " " + placeholder
		}
		line += "\n        " + strings.ReplaceAll(usage, "\n", "\n        ")
		if !isZeroDefault(f) {
			def := f.DefValue
			if isStringFlag(f) {
				def = strconv.Quote(def)
			}
			line += " (default " + def + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// flagPlaceholder returns the name of a flag's value as the usage lines
// write it and the flag's usage text: the back-quoted word of the usage
// (`HOST:PORT`), else one for its type (DURATION, N, NUMBER), else the
// flag's name in capitals (--type TYPE), and "" for a boolean flag, which
// takes none.
func flagPlaceholder(f *flag.Flag) (string, string) {
	name, usage := flag.UnquoteUsage(f)
	switch name {
	case "":
		return "", usage
	case "int", "uint":
		return "N", usage
	case "float":
		return "NUMBER", usage
	case "duration":
		return "DURATION", usage
	case "string", "value":
		return strings.ToUpper(f.Name), usage
	}
	return name, usage
}

// isStringFlag reports whether f holds a string, whose default is shown
// quoted.
func isStringFlag(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.String
}

// isZeroDefault reports whether f's default is its type's zero value, which
// the listing leaves out, as flag.PrintDefaults does.
func isZeroDefault(f *flag.Flag) (zero bool) {
	t := reflect.TypeOf(f.Value)
	if t.Kind() != reflect.Pointer {
		return f.DefValue == ""
	}
	v, ok := reflect.New(t.Elem()).Interface().(flag.Value)
	if !ok {
		return f.DefValue == ""
	}
	// A Value whose String cannot take its zero value has a default
	// worth showing.
	defer func() {
		if recover() != nil {
			zero = false
		}
	}()
	return f.DefValue == v.String()
}

// jsonAsked reports whether a command line that failed to parse asked for
// --json, so that its error is printed as JSON too: fs holds what was parsed
// before the mistake, args what came after it.
func jsonAsked(fs *flag.FlagSet, args []string) bool {
	if f := fs.Lookup("json"); f != nil && f.Value.String() == "true" {
		return true
	}
	asked := false
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		if name != "json" {
			continue
		}
		if !hasValue {
			asked = true
		} else if b, err := strconv.ParseBool(value); err == nil {
			asked = b
		}
	}
	return asked
}
