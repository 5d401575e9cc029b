package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(small, []byte("rules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		max     int64
		want    string
		wantErr error
	}{
		{name: "regular", path: small, max: 100, want: "rules: []\n"},
		{name: "exactly the bound", path: small, max: 10, want: "rules: []\n"},
		{name: "over the bound", path: small, max: 9, wantErr: ErrTooLarge},
		// Would block in open(2) forever if opened.
		{name: "named pipe", path: fifo, max: 100, wantErr: ErrNotRegular},
		{name: "directory", path: dir, max: 100, wantErr: ErrNotRegular},
		{name: "missing", path: filepath.Join(dir, "nope"), max: 100, wantErr: os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(tt.path, tt.max)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Read(%s) = %q, %v; want %v", tt.path, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Read(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
		})
	}
}
