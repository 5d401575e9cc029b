package middleware

import (
	"strconv"
	"time"
)

// Field names, as net/http canonicalizes them (CanonicalMIMEHeaderKey),
// so that they can be set in a Header map without canonicalizing each
// time; names are case-insensitive on the wire. gRPC metadata keys are
// lower case.
const (
	headerRateLimit       = "Ratelimit"
	headerRateLimitPolicy = "Ratelimit-Policy"
	headerRetryAfter      = "Retry-After"

	mdRateLimit       = "ratelimit"
	mdRateLimitPolicy = "ratelimit-policy"
	mdRetryAfter      = "retry-after"
)

// maxSFInteger is the largest integer a structured field may hold (RFC
// 9651: at most 15 digits).
const maxSFInteger = 999_999_999_999_999

// ceilSeconds returns d in whole seconds, rounded up (0 for d ≤ 0): a
// client told to come back in t seconds is then never early.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// retrySeconds is a refusal's wait in whole seconds, rounded up and at
// least 1: a refusal that says 0 invites a retry at once, which a refusal
// with no wait named (a sync round due now) would refuse again.
func retrySeconds(d time.Duration) int64 { return max(1, ceilSeconds(d)) }

// sfString returns name as a structured field string (RFC 9651 §3.3.3):
// quoted, with `"` and `\` escaped. An sf-string holds printable ASCII
// only, so each other character (a byte of invalid UTF-8 too) becomes
// '_': the field stays valid, and a name that differs only there is
// announced alike.
func sfString(name string) string {
	b := make([]byte, 0, len(name)+2)
	b = append(b, '"')
	for _, r := range name {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r >= 0x20 && r <= 0x7e:
			b = append(b, byte(r))
		default:
			b = append(b, '_')
		}
	}
	return string(append(b, '"'))
}

// appendSFInt appends n as an sf-integer, held within what one may be.
func appendSFInt(b []byte, n int64) []byte {
	return strconv.AppendInt(b, min(max(n, 0), maxSFInteger), 10)
}

// appendRateLimit appends a RateLimit field's value: the policy quoted
// (an sf-string), what is left (r) and the seconds until reset (t).
func appendRateLimit(b []byte, quoted string, remaining, reset int64) []byte {
	b = append(b, quoted...)
	b = append(b, ";r="...)
	b = appendSFInt(b, remaining)
	b = append(b, ";t="...)
	return appendSFInt(b, reset)
}

// appendPolicy appends a RateLimit-Policy field's value: the policy quoted,
// its count (q) and, when known (window > 0), its window in seconds (w),
// rounded up so that a sub-second window is not announced as 0.
func appendPolicy(b []byte, quoted string, count int64, window time.Duration) []byte {
	b = append(b, quoted...)
	b = append(b, ";q="...)
	b = appendSFInt(b, count)
	if window > 0 {
		b = append(b, ";w="...)
		b = appendSFInt(b, ceilSeconds(window))
	}
	return b
}
