// Command sluice is the sluice command line: run a node as a daemon
// (`sluice agent`), ask one for a decision (`sluice check`) or for its view
// of the cluster (`sluice members`), run the deterministic simulator
// (`sluice sim`), measure real in-process clusters (`sluice bench`), show
// classic and adaptive allocation side by side (`sluice demo`), and print
// the version.
//
// Exit status is 0 on success, 2 on any error (bad flags, a malformed config
// file, a failed call), and 1 when `sluice check` is refused.
package main

import (
	"context"
	"errors"
	"flag"
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
		"version": {runVersion, "print the version of sluice and of Go"},
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
		// `sluice help agent` is `sluice agent -h`.
		name, rest = rest[0], []string{"-h"}
	}
	cmd, ok := commands()[name]
	if !ok || cmd.run == nil {
		fmt.Fprintf(stderr, "sluice: unknown command %q; run 'sluice help' for the list\n", name)
		return 2
	}
	return exitCode(name, cmd.run(ctx, rest, stdout, stderr), stderr)
}

// exitCode prints err, if it calls for a message, and returns the exit status
// it stands for.
func exitCode(name string, err error, stderr io.Writer) int {
	var st exitStatus
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &st):
		return int(st)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "sluice %s: %v\nrun 'sluice %s -h' for usage\n", name, err, name)
		return 2
	default:
		fmt.Fprintf(stderr, "sluice %s: %v\n", name, err)
		return 2
	}
}

// exitStatus is an outcome that is not an error but has its own exit status,
// such as a refused check (1). Nothing is printed for it.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// usageError is a mistake on the command line; it exits 2 with a pointer to
// the usage text.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// printHelp lists the subcommands.
func printHelp(w io.Writer) {
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprint(w, "sluice is a distributed rate limiter.\n\nusage: sluice COMMAND [flags]\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprint(w, "\nRun 'sluice COMMAND -h' for a command's flags.\n"+
		"Exit status: 0 success, 1 refused (check), 2 error.\n")
}

// parseFlags parses args into fs, which prints nothing itself: -h prints the
// usage to stdout and returns flag.ErrHelp; a bad flag or a stray argument
// returns a usageError.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return flag.ErrHelp
	}
	if err != nil {
		return usageError{err}
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
