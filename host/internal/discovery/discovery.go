// Package discovery is the contract between vigil and a service registry:
// the [Registration] a worker publishes and readers return, the metadata
// keys it is published under, the [Registry] a writer implements, the
// [Discoverer] a reader implements, and the [Announcer] that keeps one
// worker's registration in step with its engine.
//
// Each mechanism is a subpackage holding both halves, so that its record
// format and keys are known in one place: consul (the local agent, read
// with blocking queries) and file (a directory of JSON records, polled).
//
// The Announcer drives a Registry: it registers when told to, renews the
// registration every third of the Registry's TTL on a fixed schedule, each
// call bounded by CallTimeout, registers again when the backend has lost
// it, and withdraws it on request, retrying within the caller's deadline.
package discovery

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"
)

// ErrNotRegistered is returned by Registry.Heartbeat when the backend no
// longer holds the registration (a restarted Consul agent, a deleted file):
// the Announcer then registers again.
var ErrNotRegistered = errors.New("worker not registered")

// Registration is one worker as discovery holds it: what a Registry
// publishes and a Discoverer returns.
type Registration struct {
	// Service is the service name clients look up.
	Service string
	// WorkerID identifies the worker; stable across vigil restarts.
	WorkerID string
	// Address and Port are where the worker's request endpoint is reached.
	Address string
	Port    int
	// Engine is the engine name, e.g. "vllm".
	Engine string
	// Model is the served model name; ModelID the model id or path.
	Model   string
	ModelID string
	// InstanceID is the engine's lifetime id; it changes when the engine
	// restarts.
	InstanceID string
	// TokensOnly: the worker takes prompts as token ids only, its engine
	// taking no text. False for workers of older vigils too, which
	// published no prompt kinds and served vLLM alone.
	TokensOnly bool
}

// Addr is the worker endpoint as host:port.
func (r Registration) Addr() string { return net.JoinHostPort(r.Address, strconv.Itoa(r.Port)) }

// Registry is the writing half of a backend. The Announcer calls it from one
// goroutine at a time; each call returns when done or when ctx ends.
type Registry interface {
	// Register publishes r as passing for one TTL, replacing an earlier
	// registration of the same worker.
	Register(ctx context.Context, r Registration) error
	// Heartbeat keeps r passing for another TTL. It returns an error
	// wrapping ErrNotRegistered when the backend no longer holds r.
	Heartbeat(ctx context.Context, r Registration) error
	// Deregister removes r. Removing an absent registration succeeds.
	Deregister(ctx context.Context, r Registration) error
	// TTL is how long a registration stays passing after Register or
	// Heartbeat; the Announcer renews every third of it.
	TTL() time.Duration
	// String names the backend for logs.
	String() string
}
