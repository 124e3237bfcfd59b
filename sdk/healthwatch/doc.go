// Package healthwatch follows an engine's standard gRPC health service
// (grpc.health.v1.Health, https://github.com/grpc/grpc/blob/master/doc/health-checking.md)
// the way real engine servers need it followed.
//
// Engine servers differ in how they answer Watch: some stream every change,
// some send one status and end the stream with OK, some answer
// UNIMPLEMENTED, some send nothing and end with OK. A frozen engine (its
// process stopped, its TCP connection still open) answers nothing at all.
// [Watch] therefore combines the Watch stream with Check calls under a
// deadline: a clean end of the stream is confirmed with one Check, and
// periodic Checks catch an engine that has stopped answering. A stream
// that ends UNAVAILABLE after a status, as a server or proxy that recycles
// its connections ends it (GOAWAY, then the connection closed), is reopened
// on the new connection, its first status due within the health timeout
// and, with [WatchOptions].Reopened, reported once that confirms the process
// behind it is the same; a refused reconnect ends the watch at once. HTTP/2
// keepalive pings are no substitute: gRPC servers by default cut off clients
// that ping more often than every 5 minutes (GOAWAY too_many_pings). A few
// PINGs do tell a busy engine, whose Checks time out while its transport
// answers, from a frozen one: [Busy] sends one on a [PingConn] of its own
// when a Check polled by [PollBusy] or [WatchBusy] times out, at most
// [MaxBusyPings] per busy episode.
//
// [WaitServing] waits for services to report SERVING at startup, retrying
// refused connections with a capped [Backoff]; [ConnectParams] keeps gRPC's
// own reconnect backoff under the same cap.
package healthwatch
