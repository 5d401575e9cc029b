package window

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestEqualComparesEveryField guards Equal against a field added to Rule
// and forgotten there: a rule differing in any one field is not Equal.
func TestEqualComparesEveryField(t *testing.T) {
	base := Rule{Name: "api", Count: 10, Window: time.Minute, Type: Fixed, SyncInterval: time.Second,
		Allocation: Adaptive, FailMode: FailClosed, Also: []Limit{{Count: 2, Window: time.Second}}, Shadow: false}
	if !base.Equal(base) {
		t.Fatal("a rule is not Equal to itself")
	}
	changes := map[string]func(r *Rule){
		"Name":         func(r *Rule) { r.Name = "other" },
		"Count":        func(r *Rule) { r.Count++ },
		"Window":       func(r *Rule) { r.Window++ },
		"Type":         func(r *Rule) { r.Type = Sliding },
		"SyncInterval": func(r *Rule) { r.SyncInterval++ },
		"Allocation":   func(r *Rule) { r.Allocation = Owner },
		"FailMode":     func(r *Rule) { r.FailMode = FailOpen },
		"Also":         func(r *Rule) { r.Also = []Limit{{Count: 3, Window: time.Second}} },
		"Shadow":       func(r *Rule) { r.Shadow = true },
	}
	if n := reflect.TypeFor[Rule]().NumField(); n != len(changes) {
		t.Fatalf("Rule has %d fields and the test changes %d: add the new one here and to Equal", n, len(changes))
	}
	for field, change := range changes {
		r := base
		r.Also = append([]Limit(nil), base.Also...)
		change(&r)
		if base.Equal(r) || r.Equal(base) {
			t.Errorf("rules differing in %s are Equal", field)
		}
	}
}

func TestPartsAndValidation(t *testing.T) {
	rule := Rule{Name: "api", Count: 20, Window: time.Second, Type: Fixed, SyncInterval: 100 * time.Millisecond,
		Also: []Limit{{Count: 1000, Window: time.Minute, Type: Sliding}}, Shadow: true}
	parts := rule.Parts()
	if len(parts) != 2 || parts[0].Name != "api" || parts[1].Name != "api#2" ||
		parts[1].Count != 1000 || parts[1].Window != time.Minute || parts[1].Type != Sliding ||
		parts[1].SyncInterval != rule.SyncInterval || !parts[1].Shadow || parts[0].Also != nil {
		t.Fatalf("parts: %+v", parts)
	}
	for _, p := range parts {
		if err := p.ValidatePart(); err != nil {
			t.Errorf("part %q: %v", p.Name, err)
		}
		if owner, isPart := PartOf(p.Name); owner != "api" || isPart != (p.Name != "api") {
			t.Errorf("PartOf(%q) = %q, %v", p.Name, owner, isPart)
		}
	}
	tests := []struct {
		name  string
		edit  func(r *Rule)
		field string // "" for a valid rule
	}{
		{"valid", func(r *Rule) {}, ""},
		{"part name is not a rule name", func(r *Rule) { r.Name = "api#2" }, "name"},
		{"bad extra count", func(r *Rule) { r.Also[0].Count = 0 }, "count"},
		{"extra window under the sync interval", func(r *Rule) { r.Also[0].Window = 50 * time.Millisecond }, "sync_interval"},
		{"repeats the first window", func(r *Rule) { r.Also[0].Window, r.Also[0].Type = time.Second, Fixed }, "limits[1]"},
		{"repeats another extra", func(r *Rule) { r.Also = append(r.Also, r.Also[0]) }, "limits[2]"},
		{"too many", func(r *Rule) {
			for i := range MaxLimits {
				r.Also = append(r.Also, Limit{Count: 5, Window: time.Duration(i+2) * time.Hour})
			}
		}, "limits"},
		{"strict with extras", func(r *Rule) { r.SyncInterval = Strict }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rule
			r.Also = append([]Limit(nil), rule.Also...)
			tc.edit(&r)
			err := r.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalidRule) {
				t.Fatalf("got %v; want an error on field %s", err, tc.field)
			}
		})
	}
	if err := (&Rule{Name: "api#9", Count: 1, Window: time.Second, SyncInterval: Strict}).ValidatePart(); err == nil ||
		!strings.Contains(err.Error(), "name") {
		t.Fatalf("a part number past MaxLimits: %v", err)
	}
}

// TestPartsProperties checks, over random rules, that a valid rule's parts
// are valid parts with distinct names, one per limit, sharing the rule's
// other fields.
func TestPartsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := Rule{Name: "r", Count: rapid.Int64Range(1, 100).Draw(t, "count"), Window: time.Second,
			SyncInterval: 100 * time.Millisecond, Allocation: Owner}
		for i := range rapid.IntRange(0, MaxLimits-1).Draw(t, "extras") {
			r.Also = append(r.Also, Limit{Count: rapid.Int64Range(1, 1000).Draw(t, "n"),
				Window: time.Duration(i+2) * time.Second, Type: rapid.SampledFrom([]Type{Fixed, Sliding}).Draw(t, "type")})
		}
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		parts := r.Parts()
		names := map[string]bool{}
		for i, p := range parts {
			if err := p.ValidatePart(); err != nil {
				t.Fatalf("part %d: %v", i, err)
			}
			if names[p.Name] {
				t.Fatalf("part name %q twice", p.Name)
			}
			names[p.Name] = true
			if p.SyncInterval != r.SyncInterval || p.Allocation != r.Allocation || p.Shadow != r.Shadow {
				t.Fatalf("part %d does not share the rule's fields: %+v", i, p)
			}
		}
		if len(parts) != 1+len(r.Also) || len(AllParts([]Rule{r, r})) != 2*len(parts) {
			t.Fatalf("%d parts for %d extra limits", len(parts), len(r.Also))
		}
	})
}
