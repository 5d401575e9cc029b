package main

import (
	"context"
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
