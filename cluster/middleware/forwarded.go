package middleware

import "strings"

// appendForwardedFor appends to hops one entry per element of an RFC 7239
// Forwarded field value: its for= parameter's value, unquoted, or "" (not
// an address) for an element that has none, has two, or is malformed.
// Empty elements ("a, , b", a trailing comma) are skipped, as RFC 9110
// asks of lists.
//
//	Forwarded: for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"
//
// It reads left to right, as a quoted string may hold a comma, and never
// fails: from a malformed element it skips to the next comma outside
// quotes.
func appendForwardedFor(hops []string, s string) []string {
	for i := 0; i < len(s); {
		var (
			forValue string
			pairs    int
			ok       bool
		)
		forValue, pairs, ok, i = readElement(s, i)
		switch {
		case ok && pairs == 0: // an empty element
		case ok:
			hops = append(hops, forValue)
		default:
			hops = append(hops, "")
		}
	}
	return hops
}

// readElement reads the element of a Forwarded value that starts at
// s[i:]: pairs separated by ';', up to a ',' or the end. It returns the
// value of its one for= pair ("" if none), how many pairs it held, false
// when it is malformed or has several for= pairs, and the index after it.
func readElement(s string, i int) (forValue string, pairs int, ok bool, next int) {
	fors := 0
	for {
		i = skipOWS(s, i)
		if i < len(s) && s[i] != ',' && s[i] != ';' {
			start := i
			for i < len(s) && isTokenChar(s[i]) {
				i++
			}
			name := s[start:i]
			if name == "" || i >= len(s) || s[i] != '=' {
				return "", pairs, false, skipToComma(s, i)
			}
			value, after, valid := readValue(s, i+1)
			if !valid {
				return "", pairs, false, skipToComma(s, after)
			}
			i = skipOWS(s, after)
			pairs++
			if strings.EqualFold(name, "for") {
				forValue = value
				fors++
			}
		}
		switch {
		case i >= len(s):
			return forValue, pairs, fors <= 1, i
		case s[i] == ';':
			i++
		case s[i] == ',':
			return forValue, pairs, fors <= 1, i + 1
		default:
			return "", pairs, false, skipToComma(s, i)
		}
	}
}

// readValue reads a token or a quoted string at s[i:], returning the
// value (unquoted, escapes resolved), the index after it, and false when
// there is neither (an empty value, or a quote never closed).
func readValue(s string, i int) (string, int, bool) {
	if i < len(s) && s[i] == '"' {
		i++
		start := i
		escaped := false
		for i < len(s) && s[i] != '"' {
			if s[i] == '\\' {
				escaped = true
				i++
			}
			i++
		}
		if i >= len(s) {
			return "", len(s), false
		}
		v := s[start:i]
		if escaped {
			v = unescapeQuoted(v)
		}
		return v, i + 1, true
	}
	start := i
	for i < len(s) && isTokenChar(s[i]) {
		i++
	}
	return s[start:i], i, i > start
}

// unescapeQuoted resolves a quoted string's backslash escapes.
func unescapeQuoted(v string) string {
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// skipOWS returns the index of the first byte at or after i that is not
// a space or tab.
func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// skipToComma returns the index after the next ',' outside quotes at or
// after i, or past the end.
func skipToComma(s string, i int) int {
	quoted := false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return i + 1
		}
	}
	return len(s) + 1
}

// isTokenChar reports whether c is an RFC 9110 tchar.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
