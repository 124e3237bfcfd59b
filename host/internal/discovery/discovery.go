// Package discovery publishes a worker in a service registry while its engine
// serves, and keeps that registration alive.
//
// A [Registry] is a backend (Consul, or a directory of files); an
// [Announcer] drives one: it registers when told to, renews the registration
// every third of the Registry's TTL, registers again when the backend has lost it, and
// withdraws it on request, retrying within the caller's deadline.
package discovery

import (
	"context"
	"errors"
	"time"
)

// ErrNotRegistered is returned by Registry.Heartbeat when the backend no
// longer holds the registration (a restarted Consul agent, a deleted file):
// the Announcer then registers again.
var ErrNotRegistered = errors.New("worker not registered")

// Registration is what discovery holds for one worker.
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
	// InstanceID is the engine's lifetime id.
	InstanceID string
}

// Registry is a discovery backend. The Announcer calls it from one goroutine
// at a time; each call returns when done or when ctx ends.
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
