package cluster

import (
	"errors"

	"github.com/sluicehq/sluice/cluster/internal/strictapi"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// Errors a node returns, to match with errors.Is: each comes wrapped with
// what it is about (the rule, the key, the hits).
var (
	// ErrClosed is returned by calls on a closed node.
	ErrClosed = errors.New("sluice: node is closed")
	// ErrOutcomeUnknown is returned for a strict check that reached the
	// leader but whose log entry may or may not have committed (leadership
	// was lost, or the check's deadline passed, mid-flight). The check may
	// have been spent; the caller decides whether to retry.
	ErrOutcomeUnknown = strictapi.ErrOutcomeUnknown
	// ErrStrictNotEnabled: Start or Reload was given a strict rule (sync
	// interval window.Strict) while Config.Strict is nil; the error names
	// the rule. Set Config.Strict to strict.Mode{} (package cluster/strict).
	ErrStrictNotEnabled = errors.New("strict mode is not enabled")

	// ErrUnknownRule: the check names no rule the node has.
	ErrUnknownRule = counter.ErrUnknownRule
	// ErrEmptyKey: the check names no key.
	ErrEmptyKey = counter.ErrEmptyKey
	// ErrKeyTooLong: the key is longer than counter.MaxKeyLen bytes.
	ErrKeyTooLong = counter.ErrKeyTooLong
	// ErrKeyNotUTF8: the key is not valid UTF-8. Keys are protobuf strings
	// on the wire, in the store and in the strict log, which must be UTF-8.
	ErrKeyNotUTF8 = counter.ErrKeyNotUTF8
	// ErrRuleNotUTF8: the rule name is not valid UTF-8. No rule has such a
	// name, so the error matches ErrUnknownRule too.
	ErrRuleNotUTF8 = counter.ErrRuleNotUTF8
	// ErrRuleTooLong: the rule name is longer than counter.MaxRuleLen
	// bytes. No rule has such a name, so the error matches ErrUnknownRule
	// too; it says the name's length, not the name.
	ErrRuleTooLong = counter.ErrRuleTooLong
	// ErrNegativeHits: the check's hits are below 0.
	ErrNegativeHits = counter.ErrNegativeHits
	// ErrHitsOverCount: the check's hits exceed the rule's count, so no
	// window could ever admit them.
	ErrHitsOverCount = counter.ErrHitsOverCount
	// ErrInvalidRule: Start or Reload was given a rule with a field out of
	// range; the error names the field (window.FieldError).
	ErrInvalidRule = window.ErrInvalidRule
)
