package main

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// usageCase is a command line that must be refused as a usage error: exit
// 2, nothing on stdout, and stderr starting with wantStderr.
type usageCase struct {
	name       string
	args       []string
	wantStderr string
}

// checkUsageErrors runs every case after the words of cmd.
func checkUsageErrors(t *testing.T, cmd []string, tests []usageCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), append(append([]string(nil), cmd...), tt.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if !strings.HasPrefix(stderr, tt.wantStderr) {
				t.Errorf("stderr %q, want it to start %q", stderr, tt.wantStderr)
			}
		})
	}
}

// helpPage is what `sluice CMD --help` prints, and the flags it lists.
type helpPage struct {
	cmd  []string // e.g. ["bench", "memory"]
	text string
	// flags maps each flag the listing shows to the name of its value
	// ("" for a boolean flag).
	flags map[string]string
}

// flagLine is one flag of a listing: "  --name VALUE".
var flagLine = regexp.MustCompile(`^  --([a-z0-9][a-z0-9-]*)(?: (\S+))?$`)

// helpPages returns the --help page of every command and bench
// subcommand.
func helpPages(t *testing.T) []helpPage {
	t.Helper()
	var cmds [][]string
	for name, c := range commands() {
		switch {
		case c.run == nil:
		case name == "bench":
			for sub := range benchCommands() {
				cmds = append(cmds, []string{"bench", sub})
			}
		default:
			cmds = append(cmds, []string{name})
		}
	}
	slices.SortFunc(cmds, slices.Compare)
	var pages []helpPage
	for _, cmd := range cmds {
		code, stdout, stderr := runCmd(context.Background(), append(slices.Clone(cmd), "--help")...)
		if code != 0 || stderr != "" {
			t.Fatalf("sluice %s --help: exit %d, stderr %q", strings.Join(cmd, " "), code, stderr)
		}
		p := helpPage{cmd: cmd, text: stdout, flags: map[string]string{}}
		_, listing, _ := strings.Cut(stdout, "\nflags:\n")
		for line := range strings.Lines(listing) {
			line = strings.TrimSuffix(line, "\n")
			if m := flagLine.FindStringSubmatch(line); m != nil {
				p.flags[m[1]] = m[2]
			}
		}
		pages = append(pages, p)
	}
	return pages
}

// singleDash finds a flag written with one dash: " -name", "[-name", "'-h".
var singleDash = regexp.MustCompile("(?:^|[\\s'\"(\\[`])-[a-zA-Z]")

// flagMention finds a flag written with two dashes, and the word after it.
var flagMention = regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`)

// TestFlagSyntax holds every command's help to one flag syntax: --name
// VALUE. The listing shows each flag as "  --name VALUE" with its usage
// indented below; the usage line names only flags the command has, with
// the listing's VALUE (none for a boolean flag); no text shows a flag with
// one dash; and a flag the text mentions is one the command has, or one of
// the command the line names ("sluice members --addr").
func TestFlagSyntax(t *testing.T) {
	pages := helpPages(t)
	byCmd := map[string]helpPage{}
	for _, p := range pages {
		byCmd[strings.Join(p.cmd, " ")] = p
	}
	for _, p := range pages {
		name := strings.Join(p.cmd, " ")
		t.Run(name, func(t *testing.T) {
			if !strings.HasPrefix(p.text, "usage: sluice "+name) {
				t.Errorf("help starts %q, want \"usage: sluice %s\"", firstLine(p.text), name)
			}
			if name != "version" && len(p.flags) == 0 {
				t.Errorf("help lists no flags:\n%s", p.text)
			}
			if _, listing, ok := strings.Cut(p.text, "\nflags:\n"); ok {
				for line := range strings.Lines(listing) {
					line = strings.TrimSuffix(line, "\n")
					if !flagLine.MatchString(line) && !strings.HasPrefix(line, "        ") {
						t.Errorf("listing line %q is neither \"  --name VALUE\" nor an indented usage", line)
					}
				}
			}
			for i, line := range strings.Split(p.text, "\n") {
				if singleDash.MatchString(line) {
					t.Errorf("line %d shows a flag with one dash: %q", i+1, line)
				}
				other := otherCommand(line, name)
				for _, m := range flagMention.FindAllStringSubmatch(line, -1) {
					if _, ok := p.flags[m[1]]; ok || m[1] == "help" {
						continue
					}
					if o, ok := byCmd[other]; ok {
						if _, ok := o.flags[m[1]]; ok {
							continue
						}
					}
					t.Errorf("line %d mentions --%s, which sluice %s does not have: %q", i+1, m[1], name, line)
				}
			}
			checkUsageLine(t, firstLine(p.text), p.flags)
		})
	}
	t.Run("sluice help", func(t *testing.T) {
		_, stdout, _ := runCmd(context.Background(), "help")
		for i, line := range strings.Split(stdout, "\n") {
			if singleDash.MatchString(line) {
				t.Errorf("line %d shows a flag with one dash: %q", i+1, line)
			}
		}
		for _, p := range pages {
			if !strings.Contains(stdout, "\n  "+p.cmd[0]+" ") {
				t.Errorf("sluice help does not list %s", p.cmd[0])
			}
		}
	})
}

// checkUsageLine checks the flags a usage line names against the listing:
// "[--addr HOST:PORT] --rule RULE [--json]"; "FILE…" marks a flag that may
// be repeated, whose listing shows FILE.
func checkUsageLine(t *testing.T, usage string, flags map[string]string) {
	t.Helper()
	words := strings.Fields(usage)
	for i, w := range words {
		w = strings.Trim(w, "[]")
		if !strings.HasPrefix(w, "--") {
			continue
		}
		name := w[2:]
		want, ok := flags[name]
		if !ok {
			t.Errorf("usage line names --%s, which the listing lacks: %q", name, usage)
			continue
		}
		got := ""
		if i+1 < len(words) {
			if next := strings.Trim(words[i+1], "[]"); !strings.HasPrefix(next, "-") && next != "flags" {
				got = strings.TrimSuffix(next, "…")
			}
		}
		if got != want {
			t.Errorf("usage line shows --%s %s, the listing --%s %s: %q", name, got, name, want, usage)
		}
	}
}

// otherCommand is the command a line of cmd's help names as "sluice X"
// (or "sluice bench X"), if it is not cmd itself.
func otherCommand(line, cmd string) string {
	m := sluiceCommand.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	name := m[1]
	if name == "bench" && m[2] != "" {
		name += " " + m[2]
	}
	if name == cmd {
		return ""
	}
	return name
}

// sluiceCommand finds "sluice CMD" or "sluice bench SUB" in a line.
var sluiceCommand = regexp.MustCompile(`sluice ([a-z]+)(?: ([a-z]+))?`)

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestREADMEFlags holds the README to the CLI: a `sluice CMD …` command line
// in it uses flags CMD has, with two dashes; every --name it mentions is a
// flag of some command, and where it is written --name VALUE with VALUE in
// capitals, that is the VALUE a command's listing shows.
func TestREADMEFlags(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages := helpPages(t)
	byCmd := map[string]helpPage{}
	// flag → the VALUEs listings show; sluice itself takes --help and
	// --version.
	placeholders := map[string][]string{"help": {""}, "version": {""}}
	for _, p := range pages {
		byCmd[strings.Join(p.cmd, " ")] = p
		for f, v := range p.flags {
			placeholders[f] = append(placeholders[f], v)
		}
	}
	invocations := 0
	for i, line := range strings.Split(string(readme), "\n") {
		for _, loc := range sluiceCommand.FindAllStringSubmatchIndex(line, -1) {
			name := line[loc[2]:loc[3]]
			rest := line[loc[3]:]
			if name == "bench" && loc[4] >= 0 {
				name += " " + line[loc[4]:loc[5]]
				rest = line[loc[5]:]
			}
			p, ok := byCmd[name]
			if !ok {
				continue
			}
			invocations++
			// The command line ends where its code span or the comment does.
			rest, _, _ = strings.Cut(rest, "`")
			rest, _, _ = strings.Cut(rest, "#")
			for _, w := range strings.Fields(rest) {
				w = strings.Trim(w, "[]")
				switch {
				case !strings.HasPrefix(w, "-") || regexp.MustCompile(`^-\d`).MatchString(w):
				case !strings.HasPrefix(w, "--"):
					t.Errorf("README line %d: sluice %s %s has one dash: %q", i+1, name, w, line)
				default:
					f, _, _ := strings.Cut(w[2:], "=")
					if _, ok := p.flags[f]; !ok {
						t.Errorf("README line %d: sluice %s has no --%s: %q", i+1, name, f, line)
					}
				}
			}
		}
		words := strings.Fields(strings.NewReplacer("`", " ", ", ", " ", "(", " ", ")", " ").Replace(line))
		for j, w := range words {
			m := regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*)$`).FindStringSubmatch(w)
			if m == nil {
				continue
			}
			vs, ok := placeholders[m[1]]
			if !ok {
				t.Errorf("README line %d mentions --%s, which no command has: %q", i+1, m[1], line)
				continue
			}
			if j+1 < len(words) && isPlaceholder(words[j+1]) && !slices.Contains(vs, words[j+1]) {
				t.Errorf("README line %d writes --%s %s; the listing writes --%s %s", i+1, m[1], words[j+1], m[1], vs[0])
			}
		}
	}
	if invocations < 10 {
		t.Errorf("found %d sluice command lines in the README, want the CLI section's", invocations)
	}
}

// isPlaceholder reports whether w names a flag's value, as FILE or
// HOST:PORT[,HOST:PORT…] do: capitals, and no lower-case letter.
func isPlaceholder(w string) bool {
	return regexp.MustCompile(`^[A-Z]`).MatchString(w) && !regexp.MustCompile(`[a-z]`).MatchString(w)
}
