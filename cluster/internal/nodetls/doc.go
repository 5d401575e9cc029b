// Package nodetls is a node's TLS: the certificate, key and CA files an
// operator names, read and checked (material.go) and read again when they
// change (reloader.go); the TLS configurations of the node's gRPC server,
// of its dials to peers and of its Raft transport, built from whatever
// material is current at each handshake (configs.go); and a listener that
// completes the Raft transport's handshakes away from its accept loop
// (listener.go).
//
// Two kinds of callers share a node's gRPC port: peers, whose certificates
// come from the peer CAs, and clients, whose certificates (when they
// present one) come from the peer or the client CAs. The server verifies
// either; Material.IsPeer tells a peer's verified chain from a client's,
// so that a client CA's certificate never acts as a peer. The Raft
// transport accepts peers alone.
package nodetls
