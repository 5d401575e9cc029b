package cluster

import (
	"fmt"
	"net"
	"strconv"
)

// CheckHostPort reports whether addr is HOST:PORT with a numeric port
// 0–65535 (HOST may be empty, meaning every interface); the error names
// field.
func CheckHostPort(field, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s must be HOST:PORT, got %q: %w", field, addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%s must have a port number 0–65535, got %q", field, addr)
	}
	return nil
}
