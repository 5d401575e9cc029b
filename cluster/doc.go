// Package cluster runs a sluice node: the embedding API (Start, Allow,
// Close), the clock and the loops that drive the pure counter table, and
// everything that talks to peers and clients.
//
// # Where to start
//
// A program that limits its own requests starts one node with its rules,
// takes a handle on each rule it checks, and asks it before each request:
//
//	node, err := cluster.Start(ctx, cluster.Config{
//		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second}},
//	})
//	...
//	defer node.Close()
//	api, err := node.Limiter("api") // ErrUnknownRule for a misspelt name
//	...
//	d, err := api.Allow(ctx, userID)
//	if err == nil && !d.Allowed {
//		// refuse; d.RetryAfter (at d.RetryAt()) says when the same hits fit
//	}
//
// A Limiter has the shape of golang.org/x/time/rate's: Allow and AllowN
// decide at once, Wait blocks until the hits are admitted, and Reserve
// takes hits that Cancel gives back if the work is not done. Node.Allow is
// the same check with the rule named on each call.
//
// A rule (window.Rule) is Count hits per key per Window, in a sliding window
// unless Type says Fixed. Its SyncInterval says how a fleet shares it: left
// at zero, nodes count locally and sync every window.DefaultSyncInterval
// (batched); window.Strict decides every check through a Raft log (exact),
// which needs strict mode: Config.Strict set to strict.Mode{} from package
// cluster/strict. Without it a strict rule fails Start and Reload with
// ErrStrictNotEnabled, and a program whose rules are all batched links no
// Raft.
// Allocation says how a batched rule's count is divided between syncs;
// window.Owner, the zero value, gives each key an owner that grants the
// others their parts.
//
// Alone, a node needs nothing else. To share rules with other nodes, give
// each a GRPCAddr for its peers and a BindAddr for gossip, and Join the
// gossip address of any node already running; DataDir keeps counts across
// restarts. TLS puts the gRPC port and the Raft transport under TLS, peers
// mutually authenticated by a peer CA; without it a node serves plaintext,
// on loopback only unless Insecure says so. SecretKeys encrypts gossip,
// keeping nodes without the keys out of the fleet; SetSecretKeys rotates
// them while the node runs. Decision says what the fleet has left (Remaining) and when a
// refused client should come back (RetryAfter). The errors a node returns
// are this package's Err values, to match with errors.Is; Allow lists them.
//
// Reload changes the rules of a running node; Metrics, RuleStats,
// DecisionLatency, PeerStats and MemberStates are what an operator watches,
// which package cluster/prom exports to Prometheus (this package links no
// metrics library), HTTPHandler serves /healthz and /readyz (Ready), and
// the `sluice agent` command (cmd/sluice)
// runs a node beside programs in other languages, which call it over gRPC
// (proto/sluice/v1). The agent's YAML config file is read by package
// cluster/configfile, which this package does not import: embedding a node
// links no YAML parser.
//
// # Layout
//
// This package is the node: Start, Allow, Reload and Close (node.go), the
// per-rule handle and its reservations (limiter.go, reservation.go), the
// decision it answers with (decision.go), the owner round trip of a check
// (borrow.go), peers and their sync streams
// (peers.go, peer_service.go; whom a node takes deltas from, senders.go,
// and the state it pulls for incarnations it has not heard of,
// relaypull.go), membership (membership.go, meta.go,
// reconnect.go, restart_detect.go; gossip encryption and its keys,
// gossipkeys.go), the clock and skew (clock.go,
// clockskew.go), persistence (persist.go), the gRPC server and its Limiter
// service (server.go, limiter_service.go), the codecs the server reads
// requests with (peercodec.go; lenient.go, for a string that is not
// UTF-8), TLS and who may call the peer services (tls.go; the files, their
// reloading and the TLS configurations are package cluster/internal/nodetls),
// metrics (metrics.go, the
// node-wide counters; stats.go, per rule, path and peer) and HTTP. Strict mode
// is package cluster/strict; the node reaches it only through the
// interfaces of cluster/internal/strictapi (strictmode.go), and the two
// share the codecs of cluster/internal/wire. Neither imports the other.
//
// At about 3,500 lines it is larger than the project's other packages
// because all of that is one node's state: the peers a check's owner is
// found among are the members gossip reports, the sync streams carry the
// borrow round trips, and Close stops them in one order. Each part is a
// file of its own; the parts that stand alone (the config file, strict
// mode, the codecs) are packages.
package cluster
