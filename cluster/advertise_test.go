package cluster

import (
	"errors"
	"testing"
)

// TestAdvertisedGRPC checks the gRPC address a node gossips when it is given
// none: the one it bound when that names a host, else a host from the
// gossip addresses, else the private address memberlist would advertise,
// with the port it bound.
func TestAdvertisedGRPC(t *testing.T) {
	private := func() (string, error) { return "10.1.2.3", nil }
	none := func() (string, error) { return "", errors.New("no private IP address found") }
	tests := []struct {
		bound, advertise, bind string
		privateIP              func() (string, error)
		want                   string
		ok                     bool
	}{
		{"127.0.0.1:7070", "", "127.0.0.1:7946", none, "127.0.0.1:7070", true},
		{"0.0.0.0:7070", "", "10.0.0.5:7946", none, "10.0.0.5:7070", true},
		{"[::]:7070", "", "[fd00::5]:7946", none, "[fd00::5]:7070", true},
		{"0.0.0.0:7070", "203.0.113.7:7946", "0.0.0.0:7946", none, "203.0.113.7:7070", true},
		{"0.0.0.0:7070", "203.0.113.7:7946", "10.0.0.5:7946", none, "203.0.113.7:7070", true},
		{"0.0.0.0:41234", "", "10.0.0.5:7946", none, "10.0.0.5:41234", true}, // the port it picked
		{"0.0.0.0:7070", "", "0.0.0.0:7946", private, "10.1.2.3:7070", true},
		{"0.0.0.0:7070", "", ":7946", none, "0.0.0.0:7070", false},
		{"0.0.0.0:7070", "", "", nil, "0.0.0.0:7070", false},
	}
	for _, tt := range tests {
		got, ok := advertisedGRPC(tt.bound, tt.advertise, tt.bind, tt.privateIP)
		if got != tt.want || ok != tt.ok {
			t.Errorf("advertisedGRPC(%q, %q, %q) = %q, %v; want %q, %v", tt.bound, tt.advertise, tt.bind, got, ok, tt.want, tt.ok)
		}
	}
}
