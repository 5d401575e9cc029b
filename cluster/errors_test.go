package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// TestErrorsFromThePackageUsersImport checks that every error Allow and
// Start return for a check or rule they cannot take matches, with
// errors.Is, a sentinel of this package.
func TestErrorsFromThePackageUsersImport(t *testing.T) {
	ctx := context.Background()
	nd, err := Start(ctx, Config{Rules: []window.Rule{{Name: "api", Count: 5, Window: time.Minute}}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	for _, tc := range []struct {
		name, rule, key string
		hits            int64
		want            error
	}{
		{"unknown rule", "apj", "user:1", 1, ErrUnknownRule},
		{"empty key", "api", "", 1, ErrEmptyKey},
		{"key too long", "api", strings.Repeat("k", counter.MaxKeyLen+1), 1, ErrKeyTooLong},
		{"key not UTF-8", "api", "user:\xff", 1, ErrKeyNotUTF8},
		{"rule not UTF-8", "api\xff", "user:1", 1, ErrRuleNotUTF8},
		{"rule not UTF-8 is unknown", "api\xff", "user:1", 1, ErrUnknownRule},
		{"rule too long", strings.Repeat("r", counter.MaxRuleLen+1), "user:1", 1, ErrRuleTooLong},
		{"rule too long is unknown", strings.Repeat("r", counter.MaxRuleLen+1), "user:1", 1, ErrUnknownRule},
		{"negative hits", "api", "user:1", -1, ErrNegativeHits},
		{"hits over the count", "api", "user:1", 6, ErrHitsOverCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nd.Allow(ctx, tc.rule, tc.key, tc.hits)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Allow(%q, %d hits) = %v, want an error matching %v", tc.rule, tc.hits, err, tc.want)
			}
		})
	}
	_, err = Start(ctx, Config{Rules: []window.Rule{{Name: "api", Count: 0, Window: time.Minute}}, Logger: testLogger(t)})
	if !errors.Is(err, ErrInvalidRule) {
		t.Fatalf("Start with a count of 0 = %v, want an error matching ErrInvalidRule", err)
	}
}
