package strict

import (
	"errors"

	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// A strict check the log could not decide comes back as a StrictDecision
// with a code and the deciding node's text. The node that asked turns the
// code back into the error the deciding node had, so that errors.Is finds
// the same sentinel whether the check was decided here or on a leader
// across a Forward; the text is only its description.
//
// The log holds checks, never decisions: a replica that replays an entry,
// whoever wrote it, decides it anew, and the code is a function of the
// error alone (strictCode), so replay stays deterministic. A decision
// without a code can only come from a leader that predates codes, in
// answer to a Forward: its error is its text alone, matching no sentinel,
// for no decision here reads meaning out of a message. During a rolling
// upgrade a follower then returns a leader's unknown-rule error as it is
// instead of answering by the rule's fail mode.

// codeErr returns the error code stands for; nil for OTHER and for codes
// this node does not know.
func codeErr(code sluicev1.StrictErrorCode) error {
	switch code {
	case sluicev1.StrictErrorCode_STRICT_ERROR_CODE_UNKNOWN_RULE:
		return counter.ErrUnknownRule
	case sluicev1.StrictErrorCode_STRICT_ERROR_CODE_EMPTY_KEY:
		return counter.ErrEmptyKey
	case sluicev1.StrictErrorCode_STRICT_ERROR_CODE_KEY_TOO_LONG:
		return counter.ErrKeyTooLong
	case sluicev1.StrictErrorCode_STRICT_ERROR_CODE_NEGATIVE_HITS:
		return counter.ErrNegativeHits
	case sluicev1.StrictErrorCode_STRICT_ERROR_CODE_HITS_OVER_COUNT:
		return counter.ErrHitsOverCount
	}
	return nil
}

// strictCode is the code for an error that kept a check from being decided.
func strictCode(err error) sluicev1.StrictErrorCode {
	for code := range sluicev1.StrictErrorCode(len(sluicev1.StrictErrorCode_name)) {
		if sentinel := codeErr(code); sentinel != nil && errors.Is(err, sentinel) {
			return code
		}
	}
	return sluicev1.StrictErrorCode_STRICT_ERROR_CODE_OTHER
}

// strictErr returns the error a decision carries, or nil if the check was
// decided. A code this node does not know (from a newer node) or OTHER
// gives an error with the deciding node's text and no sentinel.
func strictErr(d *sluicev1.StrictDecision) error {
	code, text := d.GetCode(), d.GetError()
	if code == sluicev1.StrictErrorCode_STRICT_ERROR_CODE_UNSPECIFIED {
		if text == "" {
			return nil
		}
		return errors.New(text)
	}
	e := &decidedError{text: text, is: codeErr(code)}
	if e.text == "" {
		e.text = code.String()
		if e.is != nil {
			e.text = e.is.Error()
		}
	}
	return e
}

// decidedError is the error of a check the log could not decide: the
// deciding node's text, wrapping the sentinel its code names (nil for
// OTHER).
type decidedError struct {
	text string
	is   error
}

func (e *decidedError) Error() string { return e.text }
func (e *decidedError) Unwrap() error { return e.is }
