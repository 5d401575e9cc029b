// Package envoyrls serves Envoy's rate limit service API
// (envoy.service.ratelimit.v3.RateLimitService) from a sluice node, with
// the config files of envoyproxy/ratelimit, so that Envoy, Istio, Envoy
// Gateway or Contour can point their rate_limit_service at `sluice agent`
// instead of envoyproxy/ratelimit and Redis.
//
// Load and Parse read one config file, one domain: its descriptor tree as
// envoyproxy/ratelimit reads it (domain, descriptors with key, value,
// rate_limit, shadow_mode, replaces, nested descriptors, trailing and
// inner `*` wildcards), with sluice's window_type, sync_interval,
// allocation and fail_mode allowed on a descriptor or its rate_limit.
// Errors name the file, line, domain, descriptor and field:
//
//	ratelimit.yaml:9: domain "edge": descriptor "remote_address": rate_limit: unknown field "unti" (known fields: …)
//
// Each descriptor with a counted rate_limit becomes a sluice rule named
// after the domain and the descriptor's path, DOMAIN.key_value.key, so every
// node of a fleet fed the same files has the same rules. NewLimits joins
// the files' domains; Server answers ShouldRateLimit from a node through
// one Node.AllowAll over every descriptor of a request that a limit
// matches, all or nothing.
//
// Only cmd/sluice imports this package: a program that embeds a node links
// neither Envoy's API types nor a YAML parser.
package envoyrls
