package middleware

import (
	"context"
	"net/http"
	"net/netip"
)

// KeyFromHeader keys a request by the first value of its header name
// (say, X-API-Key); a request without it, or with it empty, has no key.
func KeyFromHeader(name string) KeyFunc {
	canon := http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, bool) {
		v := r.Header[canon]
		if len(v) == 0 || v[0] == "" {
			return "", false
		}
		return v[0], true
	}
}

// KeyFromPrincipal keys a request by the principal an authentication
// layer in front of the middleware put in its context: f returns it, and
// false for an unauthenticated request (which has no key).
func KeyFromPrincipal(f func(ctx context.Context) (principal string, ok bool)) KeyFunc {
	return func(r *http.Request) (string, bool) { return f(r.Context()) }
}

// KeyFromClientIP keys a request by its client's IP address. That is the
// peer's (RemoteAddr), unless the peer is in a trusted prefix: then
// X-Forwarded-For is read right to left, each trusted proxy's entry
// skipped, and the first address outside the trusted prefixes is the
// client. An entry that is not an address (junk, "unknown") ends the
// walk, and the last trusted address before it is the client: what lies
// left of it no trusted proxy vouched for. When every entry is trusted,
// the leftmost is the client. Addresses are keyed without a zone, and an
// IPv4-mapped IPv6 address as IPv4. A RemoteAddr that is not an address (a
// Unix socket) gives no key.
//
// With no trusted prefix X-Forwarded-For is never read: any client can
// write it. Only X-Forwarded-For is read, never Forwarded: a header the
// trusted proxies do not write is the client's to forge. Proxies that
// write RFC 7239 Forwarded want KeyFromForwarded.
func KeyFromClientIP(trusted ...netip.Prefix) KeyFunc {
	p := newProxies(trusted)
	return func(r *http.Request) (string, bool) {
		peer, ok := parseRemoteAddr(r.RemoteAddr)
		if !ok {
			return "", false
		}
		if p.trusts(peer) {
			peer = p.walkXFF(peer, r.Header["X-Forwarded-For"])
		}
		return peer.String(), true
	}
}

// KeyFromForwarded is KeyFromClientIP reading the for= parameters of RFC
// 7239 Forwarded (for=192.0.2.60, for="[2001:db8::1]:4711", quoted or
// not, with or without a port) instead of X-Forwarded-For; an element
// with no for=, or for=unknown or an obfuscated name, ends the walk as a
// junk entry does.
func KeyFromForwarded(trusted ...netip.Prefix) KeyFunc {
	p := newProxies(trusted)
	return func(r *http.Request) (string, bool) {
		peer, ok := parseRemoteAddr(r.RemoteAddr)
		if !ok {
			return "", false
		}
		if p.trusts(peer) {
			peer = p.walkForwarded(peer, r.Header["Forwarded"])
		}
		return peer.String(), true
	}
}
