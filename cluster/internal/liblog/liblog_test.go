package liblog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestWriterLevels(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		quietWarn bool
		closing   bool
		want      string
	}{
		{"error", "[ERR] memberlist: Failed to send gossip", false, false, "level=ERROR"},
		{"warn", "[WARN] memberlist: suspect", false, false, "level=WARN"},
		{"quiet warn", "[WARN] memberlist: suspect", true, false, "level=INFO"},
		{"no prefix", "plain line", false, false, "level=INFO"},
		{"error while closing", "[ERR] memberlist: use of closed network connection", false, true, "level=DEBUG"},
		{"warn while closing", "[WARN] memberlist: x", false, true, "level=DEBUG"},
		{"info while closing", "[INFO] memberlist: x", false, true, "level=INFO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			w := &Writer{Log: log, QuietWarn: tt.quietWarn, Closing: func() bool { return tt.closing }}
			if _, err := w.Write([]byte(tt.line + "\n")); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); !strings.Contains(got, tt.want) || strings.Contains(got, "[") {
				t.Errorf("Write(%q) logged %q, want %s and no level prefix", tt.line, got, tt.want)
			}
		})
	}
}

func TestWriterObserve(t *testing.T) {
	var seen []string
	w := &Writer{Log: slog.New(slog.DiscardHandler), Observe: func(line string) { seen = append(seen, line) }}
	for _, line := range []string{"[ERR] memberlist: Decrypt packet failed: x\n", "plain\n"} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"memberlist: Decrypt packet failed: x", "plain"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("observed %q, want %q", seen, want)
	}
}
