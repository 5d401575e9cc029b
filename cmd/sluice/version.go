package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the release, stamped at link time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/sluice
//
// When empty, the module version from the build info is used, else "devel".
// Only the linker writes it.
var version string

// runVersion runs `sluice version`.
func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: sluice version\n\nPrints the version of sluice, the Go version it was built with, and the platform.\n")
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo()
	_, err := fmt.Fprintf(stdout, "sluice %s %s %s/%s\n", versionString(version, info), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// versionString picks the version to print: the stamped one, else the
// main module's version from the build info, plus the VCS revision when the
// build recorded one, else "devel".
func versionString(stamped string, info *debug.BuildInfo) string {
	v := stamped
	if v == "" && info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	if v == "" {
		v = "devel"
	}
	if info == nil {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && stamped == "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified == "true" {
			rev += "-dirty"
		}
		v += " (" + rev + ")"
	}
	return v
}
