// Command sluice is the sluice command line: run a node as a daemon
// (`sluice agent`), ask one for a decision (`sluice check`), for its view of
// the cluster (`sluice members`) or for its rules (`sluice rules`), run the
// deterministic simulator (`sluice sim`), measure real in-process clusters
// (`sluice bench`), show classic and owner allocation side by side (`sluice
// demo`), and print the version (`sluice version`, `sluice --version`).
//
// Exit status is 0 on success, 2 on any error (bad flags, a malformed config
// file, a failed call), and 1 when `sluice check` is refused. Flags are
// written --flag VALUE everywhere: in usage lines, flag listings and error
// messages (flags.go). An error is one line on stderr; under --json, the
// commands that ask a node print it as one JSON object on stdout instead
// (errors.go).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// command is one subcommand: its entry point and a one-line summary.
type command struct {
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	summary string
}

// commands returns the subcommands by name.
func commands() map[string]command {
	return map[string]command{
		"agent":   {runAgent, "run a sluice node serving the Limiter gRPC API"},
		"check":   {runCheck, "ask a node whether a request fits under a rule"},
		"sim":     {runSim, "simulate a cluster in virtual time and report each window"},
		"members": {runMembers, "list the members of a node's cluster and their state"},
		"demo":    {runDemo, "run 3 nodes in this process and chart what they admit, classic then owner"},
		"bench":   {runBench, "measure a real in-process cluster: accuracy (and more)"},
		"rules":   {runRules, "list the rules a node enforces and the hash it gossips of them"},
		"version": {runVersion, "print the version of sluice and of Go (also: sluice --version)"},
		"help":    {nil, "list the commands, or show one command's usage: sluice help COMMAND"},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args to a subcommand and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printHelp(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			printHelp(stdout)
			return 0
		}
		// `sluice help agent` is `sluice agent --help`.
		name, rest = rest[0], []string{"--help"}
	case "-version", "--version":
		// `sluice --version` is `sluice version`.
		name = "version"
	}
	cmd, ok := commands()[name]
	if !ok || cmd.run == nil {
		fmt.Fprintf(stderr, "sluice: %s\n", unknownCommand(name))
		return 2
	}
	return exitCode(name, cmd.run(ctx, rest, stdout, stderr), stdout, stderr)
}

// unknownCommand says that name is no command, and which one it may
// mistype.
func unknownCommand(name string) string {
	var names []string
	for n := range commands() {
		names = append(names, n)
	}
	if s, ok := suggest(name, names); ok {
		return fmt.Sprintf("unknown command %q; did you mean %q?", name, s)
	}
	return fmt.Sprintf("unknown command %q; run 'sluice help' for the list", name)
}

// printHelp lists the subcommands.
func printHelp(w io.Writer) {
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprint(w, "sluice is a distributed rate limiter.\n\nusage: sluice COMMAND [flags]\n       sluice --version\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprint(w, "\nRun 'sluice COMMAND --help' for a command's flags. Flags take two dashes and\n"+
		"their value after a space: --addr HOST:PORT (--addr=HOST:PORT works too).\n\n"+
		"Errors are one line on stderr, \"sluice COMMAND: …\". Commands that ask a node (check,\n"+
		"members, rules) run with --json print an error as one JSON object on stdout instead:\n"+
		"{\"error\": \"…\", \"code\": \"unavailable\"}, with code \"usage\" for a mistake on the command\n"+
		"line, else the gRPC status code in snake case.\n\n"+
		"Exit status: 0 success, 1 refused (check), 2 error.\n")
}
