// Package middleware puts a sluice rule in front of a service's handlers:
// net/http middleware and gRPC unary and stream server interceptors that
// check every request against a Limiter (a *cluster.Limiter, or a fake in
// tests), refuse what the rule refuses with an honest retry wait, and tell
// admitted and refused clients alike where they stand.
//
//	api, err := node.Limiter("api")
//	...
//	limit := middleware.HTTP(api, middleware.KeyFromHeader("X-API-Key"))
//	http.ListenAndServe(addr, limit(mux))
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(middleware.UnaryServerInterceptor(api, middleware.GRPCKeyFromPeer())),
//		grpc.ChainStreamInterceptor(middleware.StreamServerInterceptor(api, middleware.GRPCKeyFromPeer())),
//	)
//
// # What a client is told
//
// Every decided HTTP response carries the fields of the IETF draft
// "RateLimit header fields for HTTP" (draft-ietf-httpapi-ratelimit-headers),
// as structured fields, the policy named by the rule:
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=42;t=17
//
// q is the rule's count and w its window in seconds; r is what the key has
// left and t the seconds until its whole count is back (for a refusal: the
// seconds until the same request would be admitted). A refusal is 429 Too
// Many Requests (RefusalStatus changes it; RefusalHandler writes the whole
// response) with Retry-After in whole seconds and a one-line plain text
// body. Seconds are rounded up, so a client that waits as told is not
// early: 0.2 s is 1, 1 s is 1, 1.001 s is 2; a refusal never says 0.
//
// A refused gRPC call ends with codes.ResourceExhausted, a message naming
// the wait, a google.rpc.RetryInfo detail with the exact wait, and
// retry-after (whole seconds) in both its header and trailer metadata;
// every decided call's header metadata has ratelimit and ratelimit-policy
// with the HTTP fields' values.
//
// A rule name is an sf-string in these fields: `"` and `\` are escaped, and
// each character outside printable ASCII (which sluice's rule names never
// hold, but a fake Limiter's might) becomes `_`, so the field stays valid.
//
// # Keys
//
// The key a request is counted under is the caller's choice, passed to HTTP
// and the interceptors as a function: KeyFromHeader, KeyFromClientIP (the
// peer, or the client named by X-Forwarded-For when the peer is a trusted
// proxy), KeyFromForwarded (the same with RFC 7239 Forwarded),
// KeyFromPrincipal (what an authentication layer put in the context), or
// any KeyFunc; for gRPC GRPCKeyFromPeer, GRPCKeyFromMetadata,
// GRPCKeyFromPrincipal, or any GRPCKeyFunc. There is no default: a service
// behind a load balancer that counted by peer address would count the
// balancer. Prefix namespaces keys, so that several middlewares share a
// rule without sharing counts; a key longer than the node accepts, or one
// that is not valid UTF-8, is counted under its SHA-256, not passed
// through.
//
// A request with no key (a missing header) is passed through by default;
// RefuseMissingKey answers it 400 (codes.InvalidArgument) instead.
//
// # When the limiter fails
//
// A check that fails (the rule was removed by a reload, the node is
// closed, the request's context ended, a strict check's outcome is
// unknown) admits the request by default: a limiter is not a reason for an
// outage. FailClosed refuses it with 503 (codes.Unavailable) instead.
//
// # Counting
//
// Every request ends in one Outcome, given to the OnEvent callback with the
// key, the decision and the error; Counts is a ready callback that counts
// them for Stats, to export as a service likes. The package has no metrics
// dependency.
//
// # Cost
//
// The middleware passes the request's context to the limiter, so a client
// that goes away ends a check that waits on an owner; it never waits
// beyond that one check, and it never calls Wait. Cost sets the hits a
// request spends (default 1). The middleware's own cost for an admitted
// HTTP request is about 0.4 µs and two allocations, the two field values
// (BenchmarkHTTPAdmitted, against a fake limiter).
package middleware
