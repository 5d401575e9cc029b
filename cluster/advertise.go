package cluster

import "net"

// advertisedGRPC is the gRPC address a node gossips when it is given none
// (Config.GRPCAdvertiseAddr): the address its server bound, except that
// where that host is a wildcard (0.0.0.0, [::], none), which peers cannot
// dial, it takes the host of the first of advertise and bind (the gossip
// addresses) that names one, or else privateIP's, the address memberlist
// itself advertises for a wildcard bind. It reports false when nothing
// names a host.
func advertisedGRPC(bound, advertise, bind string, privateIP func() (string, error)) (string, bool) {
	if !bindsEverywhere(bound) {
		return bound, true
	}
	_, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound, false
	}
	for _, addr := range []string{advertise, bind} {
		if host, _, err := net.SplitHostPort(addr); err == nil && !bindsEverywhere(addr) {
			return net.JoinHostPort(host, port), true
		}
	}
	if privateIP != nil {
		if ip, err := privateIP(); err == nil && ip != "" {
			return net.JoinHostPort(ip, port), true
		}
	}
	return bound, false
}

// bindsEverywhere reports whether addr's host is empty or a wildcard such as
// 0.0.0.0 or [::].
func bindsEverywhere(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
