package middleware

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// GRPCKeyFromPeer keys a call by its peer's IP address (no port: a client
// opens connections from many), as KeyFromClientIP keys a peer. A peer
// that is not an IP address (a Unix socket) gives no key.
func GRPCKeyFromPeer() GRPCKeyFunc {
	return func(ctx context.Context, _ string) (string, bool) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", false
		}
		if t, ok := p.Addr.(*net.TCPAddr); ok {
			if a, ok := netip.AddrFromSlice(t.IP); ok {
				return normAddr(a).String(), true
			}
			return "", false
		}
		a, ok := parseRemoteAddr(p.Addr.String())
		if !ok {
			return "", false
		}
		return a.String(), true
	}
}

// GRPCKeyFromMetadata keys a call by the first value of its incoming
// metadata key name (say, x-api-key; keys are case-insensitive); a call
// without it, or with it empty, has no key.
func GRPCKeyFromMetadata(name string) GRPCKeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, bool) {
		v := metadata.ValueFromIncomingContext(ctx, name)
		if len(v) == 0 || v[0] == "" {
			return "", false
		}
		return v[0], true
	}
}

// GRPCKeyFromPrincipal keys a call by the principal an authentication
// interceptor before this one put in its context: f returns it, and false
// for an unauthenticated call (which has no key).
func GRPCKeyFromPrincipal(f func(ctx context.Context) (principal string, ok bool)) GRPCKeyFunc {
	return func(ctx context.Context, _ string) (string, bool) { return f(ctx) }
}
