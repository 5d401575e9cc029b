package envoyrls

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// segment is a descriptor's part of a path, as envoyproxy/ratelimit writes
// it: key, or key_value.
func segment(key, value string) string {
	if value == "" {
		return key
	}
	return key + "_" + value
}

// ruleName is the sluice rule of the limit at path in domain:
// DOMAIN.key_value.key, the path as envoyproxy/ratelimit names its stats,
// with every byte a rule name cannot hold written as :XX (':' itself too,
// so that two paths never share a name by escaping). A name longer than a
// rule's is cut and ends in a hash of the whole, so it stays unique. It
// depends on nothing but the file: every node names a limit alike.
func ruleName(domain, path string) string {
	full := domain + "." + path
	var b strings.Builder
	for i := 0; i < len(full); i++ {
		c := full[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' {
			b.WriteByte(c)
			continue
		}
		const hexDigits = "0123456789ABCDEF"
		b.WriteByte(':')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xF])
	}
	name := b.String()
	if len(name) <= window.MaxNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(full))
	tag := ":" + hex.EncodeToString(sum[:8])
	return name[:window.MaxNameLen-len(tag)] + tag
}

// keyHashLen is how much of a long key is kept before its hash.
const keyHashLen = counter.MaxKeyLen - 1 - 2*16

// checkKey is the sluice key a request descriptor counts under, within the
// rule its path matched: every entry as key=value, joined by '|', with '|'
// and '\' in values escaped, so that distinct values never share a key.
// An entry matched by a share_threshold wildcard counts under the pattern
// instead of its value: every value it matches shares one count, as
// envoyproxy/ratelimit's cache key does. A key longer than sluice takes,
// or one that is not valid UTF-8, which sluice does not take either (an
// Envoy header value may hold any byte above 0x7F), is cut, made UTF-8 and
// ends in a hash of the whole (128 bits, so that no client can make its
// key collide with another's).
func checkKey(entries []*ratelimitv3.RateLimitDescriptor_Entry, matched []*tree) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(e.GetKey())
		b.WriteByte('=')
		v := e.GetValue()
		if matched[i].share {
			v = matched[i].value
		}
		for j := 0; j < len(v); j++ {
			if c := v[j]; c == '|' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(v[j])
		}
	}
	key := b.String()
	if len(key) <= counter.MaxKeyLen && utf8.ValidString(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	// '?' for each run of bytes that are not UTF-8, a rune cut at the end
	// too: never longer than what it replaces.
	head := strings.ToValidUTF8(key[:min(len(key), keyHashLen)], "?")
	return head + "#" + hex.EncodeToString(sum[:16])
}
