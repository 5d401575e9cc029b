package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/configfile"
)

// checkPlaintext refuses an agent without tls that would listen beyond
// loopback in plaintext, unless insecure says it means to: it names the
// address and what to set. The node refuses such a config too; the agent
// says it in the words of its file and flags, before it binds anything.
func checkPlaintext(f *configfile.Config) error {
	if f.TLS != nil || f.Insecure {
		return nil
	}
	for _, a := range []struct{ field, flag, addr string }{
		{"grpc_addr", "--grpc-addr", f.GRPCAddr}, {"gossip_addr", "--gossip-addr", f.GossipAddr},
		{"raft_addr", "", f.RaftAddr},
	} {
		if a.addr == "" || isLoopback(a.addr) {
			continue
		}
		name := a.field
		if a.flag != "" {
			name += " (" + a.flag + ")"
		}
		return fmt.Errorf("%s %s is not a loopback address, and the agent has no tls: set tls in the config file "+
			"(cert_file, key_file, peer_ca_file), or insecure: true (or --insecure) to serve plaintext there on purpose",
			name, a.addr)
	}
	return nil
}

// isLoopback reports whether addr (HOST:PORT) listens on loopback alone:
// localhost or a loopback IP; an empty or wildcard host is every
// interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsAttrs describe the agent's TLS in its start line.
func tlsAttrs(f *configfile.Config) []any {
	switch {
	case f.TLS == nil && f.Insecure:
		return []any{"tls", "off (insecure)"}
	case f.TLS == nil:
		return []any{"tls", "off"}
	case f.TLS.RequireClientCert:
		return []any{"tls", "on", "client_certs", "required"}
	}
	return []any{"tls", "on", "client_certs", "optional"}
}

// gossipAttrs describe the agent's gossip encryption in its start line.
func gossipAttrs(a *agent) []any {
	switch keys := a.node.Metrics().GossipKeys; {
	case a.GossipAddr() == "":
		return nil
	case keys == 0:
		return []any{"gossip_encryption", "off"}
	case a.plaintext != cluster.PlaintextRefused:
		return []any{"gossip_encryption", "on", "gossip_keys", keys, "gossip_plaintext", a.plaintext.String()}
	default:
		return []any{"gossip_encryption", "on", "gossip_keys", keys}
	}
}
