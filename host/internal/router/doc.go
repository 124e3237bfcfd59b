// Package router provides `vigil route`: a router in front of a fleet of
// vigil workers that it finds in discovery, serving the worker API
// (vigil.worker.v1) over gRPC and an OpenAI-compatible API (completions,
// chat completions, models) over HTTP.
//
// How a request travels:
//
//  1. A [discovery.Discoverer] watches discovery (Consul's health endpoint
//     with blocking queries, or the file registry polled every 100ms) and
//     hands every changed set of passing workers to [Pool.Update]. Each set
//     replaces the previous one at once: a worker that discovery dropped is
//     never picked again, even by a request already retrying. The router
//     knows workers only as [discovery.Registration]s, never a backend's
//     record format (TestRouterSeesDiscoveryOnlyThroughItsContract).
//  2. The [Pool] keeps one gRPC connection per worker address, opened when
//     the address appears and closed when it has left discovery and its last
//     stream has ended. Among the workers serving the requested model (any
//     worker when the request names none) that take its kind of prompt
//     (text: not token-only workers; chat messages: workers with a chat
//     template) and whose capabilities (discovery metadata caps) meet what
//     it asks (structured output, n, penalties...: needsOf), skipping
//     workers this request has already tried, it picks the one with fewer requests outstanding
//     of two chosen at random ([LeastOutstanding]), or the next in turn
//     ([RoundRobin], vigil route --balance). The default, [PeakEWMA], takes
//     the cheapest of three by time to first message and load, a failure
//     by the worker's fault counting as a 30 s one ([Lease.Failed]), so a
//     worker failing at once is passed over, not taken for the fastest.
//  3. The [Proxy] sends the request to the picked worker. A request whose
//     encoded size is over the workers' limit (workerapi.MaxRequestBytes,
//     their gRPC receive limit) is refused first, with a [TooLargeError],
//     and never sent. When the worker answers UNAVAILABLE or
//     RESOURCE_EXHAUSTED (--max-inflight) before its first message, nothing
//     was generated, so the Proxy tries another worker, up to
//     [ProxyConfig.Retries] more times; a RESOURCE_EXHAUSTED for a message
//     over a gRPC size limit is a TooLargeError too, never retried. Each
//     request names the worker meant (workerapi.MetaWorkerID); a worker of
//     another id at that address answers workerapi.ReasonWorkerMismatch,
//     and the Proxy tries another worker without using up a retry and
//     [Pool.Quarantine]s the stale entry until discovery changes it.
//     From the first message on it relays
//     the worker's stream as it is: chunks, the final message, the status.
//     A request no current worker can serve fails with UNAVAILABLE (HTTP
//     503 with Retry-After: retry later) when its model is known: a worker
//     served it within [DefaultModelMemory] (10 minutes), or it was given
//     with --model ([PoolConfig.Models]), or no worker at all is known.
//     Only a model never seen, or forgotten, while other workers serve
//     fails with NOT_FOUND (HTTP 404, which clients do not retry).
//  4. [NewGRPCServer] serves the Proxy as vigil.worker.v1.Worker (the same
//     API a single worker serves), beside grpc.health.v1, which reports
//     [Pool.Serving] (the router can route: at least one worker) as HTTP
//     GET /health does: one source, so the two never disagree.
//     [NewHTTPHandler] maps POST /v1/completions, POST
//     /v1/chat/completions (a messages prompt), POST /v1/responses (a
//     messages prompt too), GET /v1/models[/{id}] and
//     GET /health onto it; gRPC status codes become HTTP statuses and
//     OpenAI error bodies in OpenAI's field names (errors.go), and request
//     fields vigil cannot honour are refused unless neutral (params.go).
//
// The client's cancellation and the request timeout travel to the worker as
// the context of its call, so an abandoned request stops generating.
//
// [Server] is the lifecycle around them, as the supervisor is `vigil run`'s:
// it starts the pool, the discovery watch and both servers, serves until a
// stop signal (or a server fails), says NOT_SERVING (and /health 503) at
// once while it serves on for the shutdown delay, then drains in one
// select that a second signal or the shutdown budget cuts short, unwinds what it started, and
// returns why it ended (nil, or an error wrapping an outcome sentinel) for
// the command package to turn into the exit code.
package router
