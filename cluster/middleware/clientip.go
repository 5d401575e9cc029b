package middleware

import (
	"net/netip"
	"strings"
)

// proxies is a set of trusted prefixes.
type proxies []netip.Prefix

// newProxies copies trusted, each prefix masked, an IPv4-mapped prefix as
// the IPv4 prefix it maps (addresses are compared unmapped), and invalid
// prefixes left out.
func newProxies(trusted []netip.Prefix) proxies {
	p := make(proxies, 0, len(trusted))
	for _, t := range trusted {
		if !t.IsValid() {
			continue
		}
		if a := t.Addr(); a.Is4In6() && t.Bits() >= 96 {
			t = netip.PrefixFrom(a.Unmap(), t.Bits()-96)
		}
		p = append(p, t.Masked())
	}
	return p
}

// trusts reports whether a is in one of the prefixes.
func (p proxies) trusts(a netip.Addr) bool {
	for _, t := range p {
		if t.Contains(a) {
			return true
		}
	}
	return false
}

// walkXFF returns the client X-Forwarded-For names behind peer, a
// trusted proxy: the header's lines and, within each, its comma-separated
// entries, read from the right. Empty entries are skipped.
func (p proxies) walkXFF(peer netip.Addr, lines []string) netip.Addr {
	client := peer
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for s != "" {
			var entry string
			if j := strings.LastIndexByte(s, ','); j >= 0 {
				entry, s = s[j+1:], s[:j]
			} else {
				entry, s = s, ""
			}
			entry = strings.Trim(entry, " \t")
			if entry == "" {
				continue
			}
			a, ok := parseNode(entry)
			if !ok {
				return client
			}
			client = a
			if !p.trusts(a) {
				return client
			}
		}
	}
	return client
}

// walkForwarded is walkXFF for the for= parameters of Forwarded's
// elements. An element without a usable for= ends the walk.
func (p proxies) walkForwarded(peer netip.Addr, lines []string) netip.Addr {
	var buf [16]string
	hops := buf[:0]
	for _, line := range lines {
		hops = appendForwardedFor(hops, line)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseNode(hops[i])
		if !ok {
			return client
		}
		client = a
		if !p.trusts(a) {
			return client
		}
	}
	return client
}

// parseRemoteAddr reads an http.Request's RemoteAddr: host:port, or an
// address alone.
func parseRemoteAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normAddr(ap.Addr()), true
	}
	return parseNode(s)
}

// normAddr is a as a key has it: an IPv4-mapped address as IPv4, no zone.
func normAddr(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// parseNode reads one hop's address: IPv4, IPv6 bare or in brackets,
// either with a port (digits, or an RFC 7239 obfuscated port "_abc")
// after the IPv4 address or the brackets. Anything else (junk, "unknown",
// an obfuscated name, an empty string) is not an address.
func parseNode(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		return normAddr(a), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normAddr(a), true
	}
	if i := strings.LastIndexByte(s, ':'); i > 0 && validPort(s[i+1:]) {
		if a, err := netip.ParseAddr(s[:i]); err == nil && a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// validPort reports whether s is a port: 1 to 5 digits, or RFC 7239's
// obfuscated port, '_' and then letters, digits, '.', '_' or '-'.
func validPort(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '_' {
		if len(s) == 1 {
			return false
		}
		for i := 1; i < len(s); i++ {
			if !isObfChar(s[i]) {
				return false
			}
		}
		return true
	}
	if len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isObfChar reports whether c may be in an obfuscated identifier.
func isObfChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
