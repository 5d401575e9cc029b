package counter

import "errors"

// Errors Allow returns for a check it cannot decide; each is wrapped with the
// offending value.
var (
	ErrUnknownRule   = errors.New("unknown rule")
	ErrEmptyKey      = errors.New("key must not be empty")
	ErrKeyTooLong    = errors.New("key too long")
	ErrNegativeHits  = errors.New("hits must be ≥ 0")
	ErrHitsOverCount = errors.New("hits exceed the rule's count and can never be admitted")
)

// MaxKeyLen is the longest key a check may name, in bytes.
const MaxKeyLen = 1024
