package envoyrls

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// checkText reports the first character that cannot be in a YAML file:
// bytes that are not UTF-8, and the control characters YAML forbids. The
// YAML parser rejects them too, but without saying where. A file that
// starts with a UTF-16 byte order mark is left to the parser, which reads
// UTF-16 itself.
func checkText(path string, data []byte) error {
	if bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF}) {
		return nil
	}
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return &Error{Path: path, Line: line,
				Err: fmt.Errorf("not a YAML text file: byte 0x%02X at column %d is not UTF-8", data[i], col)}
		case !printable(r):
			return &Error{Path: path, Line: line,
				Err: fmt.Errorf("not a YAML text file: control character %U at column %d", r, col)}
		}
		i += size
		// Line breaks as YAML counts them: \r\n is one.
		switch {
		case r == '\r' && i < len(data) && data[i] == '\n':
			col++
		case r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
			line, col = line+1, 1
		default:
			col++
		}
	}
	return nil
}

// printable reports whether YAML allows r in a file (YAML 1.2 §5.1).
func printable(r rune) bool {
	switch {
	case r == '\t', r == '\n', r == '\r', r >= 0x20 && r <= 0x7E, r == 0x85:
		return true
	case r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}
