package window

import (
	"testing"
	"time"
)

// TestWithDefaults checks the sync interval a rule that sets none gets:
// 200 ms from windows of a second, a fifth of shorter ones, never below the
// minimum; a rule that sets one, or is strict, keeps it.
func TestWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		window, sync, want time.Duration
	}{
		{time.Minute, 0, 200 * time.Millisecond},
		{time.Second, 0, 200 * time.Millisecond},
		{500 * time.Millisecond, 0, 100 * time.Millisecond},
		{20 * time.Millisecond, 0, MinSyncInterval},
		{time.Second, 50 * time.Millisecond, 50 * time.Millisecond},
		{time.Second, Strict, Strict},
	} {
		r := Rule{Name: "api", Count: 10, Window: tc.window, SyncInterval: tc.sync}
		got := r.WithDefaults()
		if got.SyncInterval != tc.want {
			t.Errorf("window %v, sync %v: defaulted to %v, want %v", tc.window, tc.sync, got.SyncInterval, tc.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("window %v, sync %v: the defaulted rule is invalid: %v", tc.window, tc.sync, err)
		}
	}
	// A window too short for any batched sync stays invalid, and says so.
	r := Rule{Name: "api", Count: 10, Window: 10 * time.Millisecond}.WithDefaults()
	if err := r.Validate(); err == nil {
		t.Error("a 10 ms window with no sync interval validated")
	}
	rules := []Rule{{Name: "a", Count: 1, Window: time.Second}}
	if out := WithDefaults(rules); out[0].SyncInterval != DefaultSyncInterval || rules[0].SyncInterval != 0 {
		t.Errorf("WithDefaults gave %v and left the original at %v, want %v and 0", out[0].SyncInterval, rules[0].SyncInterval, DefaultSyncInterval)
	}
}
