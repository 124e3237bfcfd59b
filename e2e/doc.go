// Package e2e holds vigil's end-to-end tests: they build the real vigil
// binary and each engine's mock engine (the engine table, in
// engines_test.go), run them as processes against a real Consul agent on
// loopback, and check exit codes, logs and what discovery holds.
//
// The Consul agent is built from the Go module proxy by `make consul` (see
// tools/consul); set VIGIL_CONSUL_BIN to use another one. `go test -short`
// skips these tests.
package e2e
