package window

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validRule() Rule {
	return Rule{Name: "api", Count: 100, Window: time.Second, SyncInterval: 200 * time.Millisecond}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Rule)
		wantErr string // empty: valid
	}{
		{"defaults", func(*Rule) {}, ""},
		{"strict", func(r *Rule) { r.SyncInterval = Strict }, ""},
		{"fixed", func(r *Rule) { r.Type = Fixed }, ""},
		{"name chars", func(r *Rule) { r.Name = "a-Z_0.9:x" }, ""},
		{"max count", func(r *Rule) { r.Count = MaxCount }, ""},
		{"min window", func(r *Rule) { r.Window = time.Millisecond; r.SyncInterval = Strict }, ""},
		{"zero count", func(r *Rule) { r.Count = 0 }, "count must be ≥ 1, got 0"},
		{"negative count", func(r *Rule) { r.Count = -5 }, "count must be ≥ 1, got -5"},
		{"huge count", func(r *Rule) { r.Count = MaxCount + 1 }, "count must be ≤ 2^40"},
		{"empty name", func(r *Rule) { r.Name = "" }, "name must not be empty"},
		{"long name", func(r *Rule) { r.Name = strings.Repeat("a", 129) }, "name must be ≤ 128 bytes"},
		{"bad name", func(r *Rule) { r.Name = "a b" }, `name "a b" has ' ' at byte 1`},
		{"tiny window", func(r *Rule) { r.Window = time.Microsecond }, "time_window must be ≥ 1ms"},
		{"zero sync", func(r *Rule) { r.SyncInterval = 0 }, "sync_interval must be -1 (strict) or ≥ 10ms"},
		{"small sync", func(r *Rule) { r.SyncInterval = 5 * time.Millisecond }, "sync_interval must be"},
		{"sync = window", func(r *Rule) { r.SyncInterval = time.Second }, "sync_interval must be"},
		{"sync -2", func(r *Rule) { r.SyncInterval = -2 }, "sync_interval must be"},
		{"bad type", func(r *Rule) { r.Type = 7 }, "window_type must be fixed or sliding"},
		{"bad allocation", func(r *Rule) { r.Allocation = 9 }, "allocation must be owner, adaptive or classic"},
		{"bad fail mode", func(r *Rule) { r.FailMode = 9 }, "fail_mode must be open, closed or local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRule()
			tt.mutate(&r)
			err := r.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %q, want it to contain %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidRule) {
				t.Errorf("errors.Is(%v, ErrInvalidRule) = false", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Errorf("error %v is not a FieldError naming a field", err)
			}
		})
	}
}

func TestParseEnums(t *testing.T) {
	tests := []struct {
		in      string
		parse   func(string) (string, error)
		want    string
		wantErr bool
	}{
		{"sliding", func(s string) (string, error) { v, err := ParseType(s); return v.String(), err }, "sliding", false},
		{"", func(s string) (string, error) { v, err := ParseType(s); return v.String(), err }, "sliding", false},
		{"fixed", func(s string) (string, error) { v, err := ParseType(s); return v.String(), err }, "fixed", false},
		{"rolling", func(s string) (string, error) { v, err := ParseType(s); return v.String(), err }, "", true},
		{"classic", func(s string) (string, error) { v, err := ParseAllocation(s); return v.String(), err }, "classic", false},
		{"", func(s string) (string, error) { v, err := ParseAllocation(s); return v.String(), err }, "owner", false},
		{"greedy", func(s string) (string, error) { v, err := ParseAllocation(s); return v.String(), err }, "", true},
		{"open", func(s string) (string, error) { v, err := ParseFailMode(s); return v.String(), err }, "open", false},
		{"closed", func(s string) (string, error) { v, err := ParseFailMode(s); return v.String(), err }, "closed", false},
		{"", func(s string) (string, error) { v, err := ParseFailMode(s); return v.String(), err }, "local", false},
		{"ajar", func(s string) (string, error) { v, err := ParseFailMode(s); return v.String(), err }, "", true},
	}
	for _, tt := range tests {
		got, err := tt.parse(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parse(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && got != tt.want {
			t.Errorf("parse(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIndex(t *testing.T) {
	tests := []struct {
		now       int64
		w         time.Duration
		wantIdx   int64
		wantElaps time.Duration
	}{
		{0, time.Second, 0, 0},
		{999_999_999, time.Second, 0, 999_999_999},
		{1_000_000_000, time.Second, 1, 0},
		{-1, time.Second, -1, time.Second - 1},
		{-1_000_000_000, time.Second, -1, 0},
		{25_500_000_000, 10 * time.Second, 2, 5_500_000_000},
	}
	for _, tt := range tests {
		if got := Index(tt.now, tt.w); got != tt.wantIdx {
			t.Errorf("Index(%d, %v) = %d, want %d", tt.now, tt.w, got, tt.wantIdx)
		}
		if got := Elapsed(tt.now, tt.w); got != tt.wantElaps {
			t.Errorf("Elapsed(%d, %v) = %v, want %v", tt.now, tt.w, got, tt.wantElaps)
		}
		if s := Start(Index(tt.now, tt.w), tt.w); s > tt.now || tt.now-s >= int64(tt.w) {
			t.Errorf("Start(Index(%d)) = %d does not contain now", tt.now, s)
		}
	}
}
