package main

import "testing"

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"check", "check", 0},
		{"chek", "check", 1},      // a deletion
		{"checks", "check", 1},    // an insertion
		{"chack", "check", 1},     // a substitution
		{"memebrs", "members", 1}, // a transposition
		{"agnet", "agent", 1},
		{"ca", "abc", 3}, // optimal string alignment: a swap is not edited again
		{"rules", "members", 5},
		{"naïve", "naive", 1}, // runes, not bytes
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := editDistance(tt.b, tt.a); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	cmds := []string{"version", "sim", "rules", "members", "demo", "check", "bench", "agent"}
	tests := []struct {
		in   string
		want string // "" for no suggestion
	}{
		{"chek", "check"},
		{"chekc", "check"},
		{"memebrs", "members"},
		{"member", "members"},
		{"rule", "rules"},
		{"agnet", "agent"},
		{"versoin", "version"},
		{"sin", "sim"},
		{"mem", "members"}, // a prefix of one command only
		{"vers", "version"},
		{"check", ""},      // itself is no suggestion
		{"x", ""},          // too short to guess
		{"nope", ""},       // too far from everything
		{"deploy", ""},     // too far from everything
		{"ch", "check"},    // a prefix of one command only
		{"chxxk", "check"}, // two edits in a longer word
		{"cxxk", ""},       // two edits in a short word are too many
	}
	for _, tt := range tests {
		got, ok := suggest(tt.in, cmds)
		if ok != (tt.want != "") || got != tt.want {
			t.Errorf("suggest(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	// Ties go to the first in sorted order, whatever the order given.
	for _, cands := range [][]string{{"ab", "ac"}, {"ac", "ab"}} {
		if got, _ := suggest("aa", cands); got != "ab" {
			t.Errorf("suggest(aa, %q) = %q, want ab", cands, got)
		}
	}
}
