package middleware

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"testing"
)

var (
	proxyNet = netip.MustParsePrefix("10.0.0.0/8")
	proxyV6  = netip.MustParsePrefix("fd00::/8")
)

func TestKeyFromClientIP(t *testing.T) {
	tests := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string // X-Forwarded-For lines
		want    string   // "" for no key
	}{
		{"no proxies: the peer", nil, "203.0.113.9:4711", nil, "203.0.113.9"},
		{"no proxies: XFF ignored", nil, "203.0.113.9:4711", []string{"198.51.100.1"}, "203.0.113.9"},
		{"untrusted peer: XFF ignored", []netip.Prefix{proxyNet}, "203.0.113.9:4711", []string{"198.51.100.1"}, "203.0.113.9"},
		{"trusted peer, no XFF: the peer", []netip.Prefix{proxyNet}, "10.1.2.3:80", nil, "10.1.2.3"},
		{"trusted peer: the client it names", []netip.Prefix{proxyNet}, "10.1.2.3:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"chain: trusted hops skipped", []netip.Prefix{proxyNet}, "10.1.2.3:80",
			[]string{"198.51.100.1, 10.9.9.9, 10.8.8.8"}, "198.51.100.1"},
		{"chain: spoofed entries left of the client", []netip.Prefix{proxyNet}, "10.1.2.3:80",
			[]string{"1.1.1.1, 2.2.2.2, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"chain over several lines", []netip.Prefix{proxyNet}, "10.1.2.3:80",
			[]string{"6.6.6.6, 198.51.100.1", "10.9.9.9", "10.8.8.8"}, "198.51.100.1"},
		{"all trusted: the leftmost", []netip.Prefix{proxyNet}, "10.1.2.3:80",
			[]string{"10.7.7.7, 10.8.8.8"}, "10.7.7.7"},
		{"junk right of the client ends the walk", []netip.Prefix{proxyNet}, "10.1.2.3:80",
			[]string{"198.51.100.1, unknown, 10.8.8.8"}, "10.8.8.8"},
		{"junk left of the client is never read", []netip.Prefix{proxyNet}, "10.1.2.3:80",
			[]string{"<script>, 198.51.100.1"}, "198.51.100.1"},
		{"junk at once: the peer", []netip.Prefix{proxyNet}, "10.1.2.3:80", []string{"not-an-ip"}, "10.1.2.3"},
		{"empty entries skipped", []netip.Prefix{proxyNet}, "10.1.2.3:80", []string{" , 198.51.100.1 ,, ", ""}, "198.51.100.1"},
		{"entry with a port", []netip.Prefix{proxyNet}, "10.1.2.3:80", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"IPv6 entries, bare and bracketed", []netip.Prefix{proxyNet, proxyV6}, "[fd00::1]:443",
			[]string{"2001:db8::1, [fd00::2]:80, fd00::3"}, "2001:db8::1"},
		{"bracketed IPv6 with a port", []netip.Prefix{proxyNet}, "10.1.2.3:80", []string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{"IPv4-mapped peer is IPv4", []netip.Prefix{proxyNet}, "[::ffff:10.1.2.3]:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"IPv4-mapped client is IPv4", nil, "[::ffff:198.51.100.1]:80", nil, "198.51.100.1"},
		{"zone dropped", nil, "[fe80::1%eth0]:80", nil, "fe80::1"},
		{"IPv4-mapped trusted prefix", []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, "10.1.2.3:80",
			[]string{"198.51.100.1"}, "198.51.100.1"},
		{"RemoteAddr without a port", nil, "198.51.100.1", nil, "198.51.100.1"},
		{"RemoteAddr of a Unix socket: no key", nil, "@", nil, ""},
		{"empty RemoteAddr: no key", nil, "", nil, ""},
		{"huge port is junk", []netip.Prefix{proxyNet}, "10.1.2.3:80", []string{"198.51.100.1:123456"}, "10.1.2.3"},
		{"bracketed IPv4 is junk", []netip.Prefix{proxyNet}, "10.1.2.3:80", []string{"[198.51.100.1]"}, "10.1.2.3"},
		{"invalid prefix ignored", []netip.Prefix{{}}, "10.1.2.3:80", []string{"198.51.100.1"}, "10.1.2.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			r.Header.Set("Forwarded", "for=192.0.2.99") // never read here
			got, ok := KeyFromClientIP(tt.trusted...)(r)
			if ok != (tt.want != "") || got != tt.want {
				t.Errorf("key %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

func TestKeyFromForwarded(t *testing.T) {
	trusted := []netip.Prefix{proxyNet, proxyV6}
	tests := []struct {
		name      string
		remote    string
		forwarded []string
		want      string
	}{
		{"RFC 7239 example", "10.1.2.3:80", []string{`for=192.0.2.60;proto=http;by=203.0.113.43`}, "192.0.2.60"},
		{"quoted bracketed IPv6 with a port", "10.1.2.3:80", []string{`for="[2001:db8::1]:4711"`}, "2001:db8::1"},
		{"quoted bracketed IPv6", "10.1.2.3:80", []string{`For="[2001:db8:cafe::17]"`}, "2001:db8:cafe::17"},
		{"quoted IPv4 with a port", "10.1.2.3:80", []string{`for="198.51.100.1:8080"`}, "198.51.100.1"},
		{"obfuscated port", "10.1.2.3:80", []string{`for="198.51.100.1:_p1"`}, "198.51.100.1"},
		{"chain, trusted skipped", "10.1.2.3:80",
			[]string{`for=198.51.100.1, for=10.9.9.9;proto=https, for="[fd00::7]:80"`}, "198.51.100.1"},
		{"chain, spoofed left of the client", "10.1.2.3:80",
			[]string{`for=6.6.6.6, for=198.51.100.1, for=10.9.9.9`}, "198.51.100.1"},
		{"chain over several lines", "10.1.2.3:80", []string{`for=198.51.100.1`, `for=10.9.9.9`}, "198.51.100.1"},
		{"quoted comma and semicolon", "10.1.2.3:80",
			[]string{`for=198.51.100.1;ext="a,b;c", for=10.9.9.9`}, "198.51.100.1"},
		{"escapes in a quoted value", "10.1.2.3:80", []string{`for="\[2001:db8::1\]:4711"`}, "2001:db8::1"},
		{"unknown ends the walk", "10.1.2.3:80", []string{`for=198.51.100.1, for=unknown, for=10.9.9.9`}, "10.9.9.9"},
		{"obfuscated name ends the walk", "10.1.2.3:80", []string{`for=198.51.100.1, for=_hidden`}, "10.1.2.3"},
		{"element without for ends the walk", "10.1.2.3:80", []string{`for=198.51.100.1, proto=https`}, "10.1.2.3"},
		{"two fors in one element end the walk", "10.1.2.3:80", []string{`for=198.51.100.1;for=198.51.100.2`}, "10.1.2.3"},
		{"malformed element ends the walk", "10.1.2.3:80", []string{`for=198.51.100.1, for 10.9.9.9`}, "10.1.2.3"},
		{"unclosed quote", "10.1.2.3:80", []string{`for="198.51.100.1`}, "10.1.2.3"},
		{"unbracketed IPv6 in quotes", "10.1.2.3:80", []string{`for="2001:db8::1"`}, "2001:db8::1"},
		{"empty elements skipped", "10.1.2.3:80", []string{`for=198.51.100.1, , for=10.9.9.9,`}, "198.51.100.1"},
		{"untrusted peer: header ignored", "203.0.113.9:80", []string{`for=198.51.100.1`}, "203.0.113.9"},
		{"no header: the peer", "10.1.2.3:80", nil, "10.1.2.3"},
		{"empty for value", "10.1.2.3:80", []string{`for=""`}, "10.1.2.3"},
		{"garbage", "10.1.2.3:80", []string{"\x00;;;,,,=\"\\"}, "10.1.2.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.forwarded {
				r.Header.Add("Forwarded", v)
			}
			r.Header.Set("X-Forwarded-For", "192.0.2.99") // never read here
			got, ok := KeyFromForwarded(trusted...)(r)
			if !ok || got != tt.want {
				t.Errorf("key %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

func TestAppendForwardedFor(t *testing.T) {
	tests := []struct {
		value string
		want  []string
	}{
		{"", nil},
		{"for=a", []string{"a"}},
		{"for=a, for=b", []string{"a", "b"}},
		{`for="x,y";by=z, for=b`, []string{"x,y", "b"}},
		{"proto=https", []string{""}},
		{"for=a;for=b", []string{""}},
		{";for=a;", []string{"a"}},
		{" for = a", []string{""}}, // a name, then ' ' not '=': malformed
		{"for=a, junk, for=c", []string{"a", "", "c"}},
		{",,", nil},
		{`for="unterminated`, []string{""}},
		{"=x, for=b", []string{"", "b"}},
	}
	for _, tt := range tests {
		got := appendForwardedFor(nil, tt.value)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("appendForwardedFor(%q) = %q, want %q", tt.value, got, tt.want)
		}
	}
}

func TestKeyFromHeaderAndPrincipal(t *testing.T) {
	tests := []struct {
		name   string
		header []string
		want   string
	}{
		{"present", []string{"k1"}, "k1"},
		{"first of several", []string{"k1", "k2"}, "k1"},
		{"empty", []string{""}, ""},
		{"missing", nil, ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		for _, v := range tt.header {
			r.Header.Add("x-api-key", v)
		}
		got, ok := KeyFromHeader("X-API-KEY")(r)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: key %q, %v; want %q", tt.name, got, ok, tt.want)
		}
	}

	type principalKey struct{}
	principal := KeyFromPrincipal(func(ctx context.Context) (string, bool) {
		p, ok := ctx.Value(principalKey{}).(string)
		return p, ok
	})
	r := httptest.NewRequest("GET", "/", nil)
	if k, ok := principal(r); ok || k != "" {
		t.Errorf("unauthenticated: key %q, %v; want none", k, ok)
	}
	r = r.WithContext(context.WithValue(r.Context(), principalKey{}, "user:42"))
	if k, ok := principal(r); !ok || k != "user:42" {
		t.Errorf("authenticated: key %q, %v; want user:42", k, ok)
	}
}
