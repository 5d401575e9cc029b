// Package configfile reads the YAML config file of `sluice agent --config`:
// where a node listens, whom it joins, its TLS (the tls mapping, or
// insecure: true for plaintext beyond loopback), its gossip keys, the
// settings it tunes and the rules it enforces (examples/sluice.yaml shows
// every field).
//
// Load and Parse return a Config, or errors that name the file, the line,
// the rule and the field at fault:
//
//	examples/bad.yaml:7: rule 2 "api": count must be ≥ 1, got 0
//
// The tls mapping names PEM files (cert_file, key_file, peer_ca_file,
// client_ca_file) and require_client_cert; the file checks that the three
// it needs are there and that insecure is not set beside it, and the node
// reads and checks the files themselves when it starts. Its errors name
// the fields as tls.cert_file.
//
// secret_keys lists the gossip keys in base64, the first encrypting, or
// secret_keys_file names a file of them, one per line, which
// Config.NodeSecretKeys reads (again on each reload, for a rotation);
// gossip_plaintext (refuse, accept or send) eases a running fleet into
// gossip encryption. Their errors name a key by its index or its line,
// secret_keys[1], and never quote one.
//
// Config.NodeRules and Config.NodeConfig turn a Config into what
// cluster.Start takes. The file format lives here rather than in package
// cluster so that a program that embeds a node does not link a YAML parser.
package configfile
