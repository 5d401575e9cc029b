package cluster

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

// TestStrictRuleNeedsStrictMode gives a node without Config.Strict a strict
// rule, at Start and at Reload: each fails with ErrStrictNotEnabled naming
// the rule, and a failed Reload leaves the rules as they were.
func TestStrictRuleNeedsStrictMode(t *testing.T) {
	batched := window.Rule{Name: "api", Count: 5, Window: time.Second}
	strict := window.Rule{Name: "pay", Count: 5, Window: time.Minute, SyncInterval: window.Strict}
	tests := []struct {
		name          string
		start, reload []window.Rule // reload nil: Start must fail
	}{
		{"start", []window.Rule{batched, strict}, nil},
		{"start, strict only", []window.Rule{strict}, nil},
		{"reload", []window.Rule{batched}, []window.Rule{batched, strict}},
		{"reload turns a rule strict", []window.Rule{batched}, []window.Rule{{Name: "api", Count: 5, Window: time.Second,
			SyncInterval: window.Strict}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			n, err := Start(ctx, Config{Name: "solo", Rules: tt.start, Logger: testLogger(t)})
			if tt.reload == nil {
				if err == nil {
					n.Close()
				}
				checkStrictNotEnabled(t, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			before := n.Rules()
			checkStrictNotEnabled(t, n.Reload(ctx, tt.reload))
			if got := n.Rules(); !reflect.DeepEqual(got, before) {
				t.Errorf("after the refused reload the rules are %+v, want %+v", got, before)
			}
			if _, err := n.Allow(ctx, "api", "k", 1); err != nil {
				t.Errorf("after the refused reload: %v", err)
			}
		})
	}
}

// checkStrictNotEnabled checks err is ErrStrictNotEnabled and names the
// strict rule and the way to enable strict mode.
func checkStrictNotEnabled(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrStrictNotEnabled) {
		t.Fatalf("got %v, want ErrStrictNotEnabled", err)
	}
	for _, want := range []string{`rule "`, "Config.Strict", "strict.Mode{}"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
