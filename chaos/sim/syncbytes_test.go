package sim

import (
	"testing"
	"time"
)

// Every sync message is counted at its encoded size: a run that syncs sends
// more bytes than entries (each entry costs a key, counts and framing), and
// a lone node sends nothing.
func TestSyncBytesCountEncodedDeltas(t *testing.T) {
	tests := []struct {
		name  string
		nodes int
	}{
		{"lone node", 1},
		{"two nodes", 2},
		{"eight nodes", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			c.Nodes, c.Duration = tt.nodes, 5*time.Second
			r, err := Run(c)
			if err != nil {
				t.Fatal(err)
			}
			if tt.nodes == 1 {
				if r.Deltas != 0 || r.SyncBytes != 0 {
					t.Fatalf("a lone node sent %d deltas, %d bytes; want none", r.Deltas, r.SyncBytes)
				}
				return
			}
			if r.Entries == 0 || r.SyncBytes <= r.Entries {
				t.Fatalf("%d deltas, %d entries, %d bytes; want bytes > entries > 0", r.Deltas, r.Entries, r.SyncBytes)
			}
			// One key per delta here: an entry and the delta's header
			// (sender, sequence numbers, rule name) fit in well under 1 KB.
			if perDelta := r.SyncBytes / r.Deltas; perDelta > 1024 {
				t.Errorf("%d bytes per delta of about one entry, want < 1024", perDelta)
			}
			t.Logf("%d deltas, %d entries, %d bytes", r.Deltas, r.Entries, r.SyncBytes)
		})
	}
}
