package middleware

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/counter"
)

// core is what HTTP and the interceptors share: the limiter, the options,
// and the check of one request.
type core struct {
	l     Limiter
	rules RuleLimiter // l, when it can say its rule; else nil
	cfg   config
	// quoted is the policy's name as an sf-string, made once.
	quoted string
	// policy is the last RateLimit-Policy value made: it changes only with
	// the rule, so requests share it.
	policy atomic.Pointer[policyField]
}

// policyField is a RateLimit-Policy value and what it was made from.
type policyField struct {
	count  int64
	window time.Duration
	value  string
}

// newCore builds the shared part of a middleware. A nil Limiter panics:
// like an invalid option, it is the program's mistake, found at start.
func newCore(l Limiter, opts []Option) *core {
	if l == nil {
		panic("middleware: nil Limiter")
	}
	c := &core{l: l, cfg: newConfig(opts), quoted: sfString(l.Name())}
	c.rules, _ = l.(RuleLimiter)
	return c
}

// check decides one request whose key function returned key and ok, and
// reports the event. The only wait is the limiter's own, under ctx.
func (c *core) check(ctx context.Context, key string, ok bool) Event {
	var e Event
	switch {
	case !ok || key == "":
		e.Outcome = NoKeyPassed
		if c.cfg.refuseMissing {
			e.Outcome = NoKeyRefused
		}
	default:
		e.Key = c.fullKey(key)
		e.Decision, e.Err = c.l.AllowN(ctx, e.Key, c.cfg.cost)
		switch {
		case e.Err != nil && c.cfg.failClosed:
			e.Outcome = FailedClosed
		case e.Err != nil:
			e.Outcome = FailedOpen
		case e.Decision.Allowed:
			e.Outcome = Admitted
		default:
			e.Outcome = Refused
		}
	}
	if c.cfg.onEvent != nil {
		c.cfg.onEvent(e)
	}
	return e
}

// hashedKeyTag marks a key counted under its digest.
const hashedKeyTag = "sha256:"

// fullKey is the key the limiter is asked about: the prefix and key, or,
// when together they are longer than a node accepts or the key is not
// valid UTF-8 (a header value may hold any byte above 0x7F), the prefix
// and the key's SHA-256. Such a key from a client is thus still counted,
// not an error that would pass it through a fail-open middleware
// unchecked.
func (c *core) fullKey(key string) string {
	p := c.cfg.prefix
	if len(p)+len(key) <= counter.MaxKeyLen && utf8.ValidString(key) {
		if p == "" {
			return key
		}
		return p + key
	}
	sum := sha256.Sum256([]byte(key))
	return p + hashedKeyTag + hex.EncodeToString(sum[:])
}

// policyValue returns the RateLimit-Policy value for decision d: the
// Policy option's count and window, or d's Limit and the rule's window.
func (c *core) policyValue(d *cluster.Decision) string {
	count, win := d.Limit, time.Duration(0)
	if c.cfg.policyCount > 0 {
		count, win = c.cfg.policyCount, c.cfg.policyWindow
	} else if c.rules != nil {
		if r, ok := c.rules.Rule(); ok {
			win = r.Window
		}
	}
	if p := c.policy.Load(); p != nil && p.count == count && p.window == win {
		return p.value
	}
	var buf [64]byte
	p := &policyField{count: count, window: win, value: string(appendPolicy(buf[:0], c.quoted, count, win))}
	c.policy.Store(p)
	return p.value
}

// rateLimitValue returns the RateLimit value for decision d: for an
// admission t is the time to reset, for a refusal the retry wait.
func (c *core) rateLimitValue(d *cluster.Decision) string {
	var buf [64]byte
	return string(appendRateLimit(buf[:0], c.quoted, d.Remaining, resetSeconds(d)))
}

// resetSeconds is a RateLimit field's t for d.
func resetSeconds(d *cluster.Decision) int64 {
	if d.Allowed {
		return ceilSeconds(d.ResetAfter)
	}
	return retrySeconds(d.RetryAfter)
}
