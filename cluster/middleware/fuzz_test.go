package middleware

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// fuzzTrusted is the proxies the fuzz tests trust: what an attacker's
// header can name as a hop, so that the walk goes on.
var fuzzTrusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("fd00::/8"),
}

// checkClientKey asserts what any client key must be: an address in its
// normal form (no zone, IPv4 not mapped), the peer's when the peer is not
// trusted, and otherwise the peer or one of the hops.
func checkClientKey(t *testing.T, remote string, hops []string, key string, ok bool) {
	t.Helper()
	peer, peerOK := parseRemoteAddr(remote)
	if ok != peerOK {
		t.Fatalf("RemoteAddr %q: key %q, %v; the peer parses %v", remote, key, ok, peerOK)
	}
	if !ok {
		return
	}
	a, err := netip.ParseAddr(key)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		t.Fatalf("key %q is not an address in normal form (%v)", key, err)
	}
	if a == peer {
		return
	}
	if !newProxies(fuzzTrusted).trusts(peer) {
		t.Fatalf("untrusted peer %v, but the key is %v", peer, a)
	}
	for _, h := range hops {
		if hop, ok := parseNode(h); ok && hop == a {
			return
		}
	}
	t.Fatalf("key %v is neither the peer %v nor one of the hops %q", a, peer, hops)
}

func FuzzXForwardedFor(f *testing.F) {
	for _, seed := range []struct{ remote, xff string }{
		{"10.1.2.3:80", "198.51.100.1"},
		{"10.1.2.3:80", "198.51.100.1, 10.9.9.9, 10.8.8.8"},
		{"10.1.2.3:80", "6.6.6.6, 198.51.100.1:5555, [fd00::1]:80"},
		{"[fd00::1]:443", "2001:db8::1, fd00::2"},
		{"10.1.2.3:80", "unknown, 10.8.8.8"},
		{"10.1.2.3:80", " ,, ,"},
		{"203.0.113.9:1", "198.51.100.1"},
		{"[::ffff:10.1.2.3]:80", "[fe80::1%eth0]:1"},
		{"@", "1.2.3.4"},
		{"10.1.2.3:80", "[::1"},
		{"10.1.2.3:80", "1.2.3.4:_obf, 1.2.3.4:99999"},
	} {
		f.Add(seed.remote, seed.xff)
	}
	key := KeyFromClientIP(fuzzTrusted...)
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header["X-Forwarded-For"] = []string{xff}
		k, ok := key(r)
		var hops []string
		for _, h := range strings.Split(xff, ",") {
			hops = append(hops, strings.Trim(h, " \t"))
		}
		checkClientKey(t, remote, hops, k, ok)
	})
}

func FuzzForwarded(f *testing.F) {
	for _, seed := range []struct{ remote, fwd string }{
		{"10.1.2.3:80", `for=192.0.2.60;proto=http;by=203.0.113.43`},
		{"10.1.2.3:80", `for="[2001:db8::1]:4711"`},
		{"10.1.2.3:80", `for=198.51.100.1, for=10.9.9.9;proto=https, for="[fd00::7]:80"`},
		{"10.1.2.3:80", `for=198.51.100.1;ext="a,b;c", for=10.9.9.9`},
		{"10.1.2.3:80", `for="\[2001:db8::1\]:4711"`},
		{"10.1.2.3:80", `for=unknown, for=_hidden, proto=https`},
		{"10.1.2.3:80", `for="198.51.100.1`},
		{"10.1.2.3:80", "\x00;;;,,,=\"\\"},
		{"[fd00::1]:443", `For="[fd00::2]", for=2001:db8::1`},
		{"203.0.113.9:80", `for=198.51.100.1`},
	} {
		f.Add(seed.remote, seed.fwd)
	}
	key := KeyFromForwarded(fuzzTrusted...)
	f.Fuzz(func(t *testing.T, remote, fwd string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header["Forwarded"] = []string{fwd}
		k, ok := key(r)
		checkClientKey(t, remote, appendForwardedFor(nil, fwd), k, ok)
		// Each element read is one entry: never more entries than
		// commas plus one.
		if n := len(appendForwardedFor(nil, fwd)); n > strings.Count(fwd, ",")+1 {
			t.Fatalf("%q: %d entries from %d commas", fwd, n, strings.Count(fwd, ","))
		}
	})
}

func FuzzParseNode(f *testing.F) {
	for _, s := range []string{
		"192.0.2.60", "192.0.2.60:80", "[2001:db8::1]:4711", "[2001:db8::1]", "2001:db8::1",
		"[fe80::1%eth0]:1", "::ffff:1.2.3.4", "unknown", "_hidden", "[1.2.3.4]", "1.2.3.4:_p", "", "[", "]:",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseNode(s)
		if ok != a.IsValid() {
			t.Fatalf("parseNode(%q) = %v, %v", s, a, ok)
		}
		if ok && (a.Zone() != "" || a.Is4In6()) {
			t.Fatalf("parseNode(%q) = %v: not in normal form", s, a)
		}
	})
}
