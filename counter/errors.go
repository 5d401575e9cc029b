package counter

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sluicehq/sluice/window"
)

// Errors Allow returns for a check it cannot decide; each is wrapped with the
// offending value.
var (
	ErrUnknownRule   = errors.New("unknown rule")
	ErrEmptyKey      = errors.New("key must not be empty")
	ErrKeyTooLong    = errors.New("key too long")
	ErrNegativeHits  = errors.New("hits must be ≥ 0")
	ErrHitsOverCount = errors.New("hits exceed the rule's count and can never be admitted")
	// ErrKeyNotUTF8 is a key that is not valid UTF-8. Keys go on the wire
	// and into the store as protobuf strings, which must be UTF-8: one such
	// key would keep a node from saving any counts, and fail every strict
	// check logged in the same entry.
	ErrKeyNotUTF8 = errors.New("key must be valid UTF-8")
	// ErrRuleNotUTF8 is a rule name that is not valid UTF-8; it matches
	// ErrUnknownRule too, since no rule is so named.
	ErrRuleNotUTF8 = errors.New("rule must be valid UTF-8")
	// ErrRuleTooLong is a rule name longer than MaxRuleLen; it matches
	// ErrUnknownRule too, since no rule is so named.
	ErrRuleTooLong = errors.New("rule name too long")
)

// MaxKeyLen is the longest key a check may name, in bytes.
const MaxKeyLen = 1024

// MaxRuleLen is the longest rule name a check may name, in bytes: a
// rule's longest name, and the suffix of one of its parts (window.PartOf;
// window.MaxLimits is one digit).
const MaxRuleLen = window.MaxNameLen + len(window.PartSep) + 1

// UnknownRule is the error for a check naming rule, which the node does not
// have: ErrUnknownRule with the name quoted, and ErrRuleNotUTF8 as well for
// a name that is not valid UTF-8. A name longer than MaxRuleLen is
// ErrRuleTooLong, which matches ErrUnknownRule, with its length alone: it
// is not sent back to whoever sent it.
func UnknownRule(rule string) error {
	if len(rule) > MaxRuleLen {
		return ruleTooLong(len(rule))
	}
	if !utf8.ValidString(rule) {
		return fmt.Errorf("%w %q: %w", ErrUnknownRule, rule, ErrRuleNotUTF8)
	}
	return fmt.Errorf("%w %q", ErrUnknownRule, rule)
}

// keyNotUTF8 is ErrKeyNotUTF8 for key, saying where its first byte that
// is not UTF-8 is.
func keyNotUTF8(key string) error {
	for i := 0; i < len(key); {
		r, size := utf8.DecodeRuneInString(key[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Errorf("%w, got byte 0x%02X at offset %d", ErrKeyNotUTF8, key[i], i)
		}
		i += size
	}
	return ErrKeyNotUTF8
}

// ruleTooLong is ErrRuleTooLong for a name of so many bytes.
type ruleTooLong int

func (n ruleTooLong) Error() string {
	return fmt.Sprintf("%v: %d bytes, at most %d", ErrRuleTooLong, int(n), MaxRuleLen)
}

// Is makes the error match ErrUnknownRule as well as ErrRuleTooLong.
func (n ruleTooLong) Is(target error) bool {
	return target == ErrRuleTooLong || target == ErrUnknownRule
}
