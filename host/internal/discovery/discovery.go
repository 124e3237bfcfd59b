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
//
// Every registration carries its writer's owner token, random per
// Announcer (per vigil run), so that two vigils given one worker id cannot
// take turns at one registration: a writer finding another owner's
// registration of its worker watches it for up to one TTL, by its own
// clock. Renewed meanwhile, it belongs to a live vigil and the writer gives
// up ([ConflictError]); not renewed, its vigil is gone (killed, say, and
// restarted with the same id) and the writer takes it over.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// ErrNotRegistered is returned by Registry.Heartbeat when the backend no
// longer holds the registration (a restarted Consul agent, a deleted file)
// or holds another owner's in its place: the Announcer then registers
// again, after watching another owner's. Registry.Deregister returns it
// when the registration it finds is another owner's, which it leaves.
var ErrNotRegistered = errors.New("worker not registered")

// ErrPermissionDenied is wrapped by a backend error when the backend
// refused the call for want of a permission (Consul's 403: no token, an
// unknown token, or one without service:write on the service). Retrying
// helps only once the token is fixed; the error's text carries the
// backend's own words, which name the missing permission.
var ErrPermissionDenied = errors.New("permission denied")

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
	// taking no text.
	TokensOnly bool
	// Chat: the worker takes chat messages (vigil.worker.v1
	// prompt.messages), having a chat template loaded.
	Chat bool
	// MaxModelLen is the model's maximum length in tokens, prompt plus
	// completion, as the engine reports it; 0 when unknown.
	MaxModelLen uint32
	// Caps is what the worker accepts beyond the basic request (MetaCaps);
	// the zero value, from a worker that does not say, reads as
	// LegacyCapabilities.
	Caps Capabilities
	// Owner is the owner token of the vigil run that publishes the
	// registration: random per Announcer, set by Announce.
	Owner string
}

// Addr is the worker endpoint as host:port.
func (r Registration) Addr() string { return net.JoinHostPort(r.Address, strconv.Itoa(r.Port)) }

// Registry is the writing half of a backend. The Announcer calls it from one
// goroutine at a time; each call returns when done or when ctx ends.
//
// A backend keeps each registration's Owner, and compares it with r.Owner
// before each Heartbeat and Deregister; the Announcer reads Claim before
// each Register. Reading and writing are two steps, not one atomic one:
// two writers that register at the same instant may both write, and the
// one overwritten finds the other's owner at its next Heartbeat.
type Registry interface {
	// Register publishes r as passing for one TTL, replacing any earlier
	// registration of the same worker, whoever wrote it.
	Register(ctx context.Context, r Registration) error
	// Heartbeat keeps r passing for another TTL. It returns an error
	// wrapping ErrNotRegistered when the backend no longer holds r, or
	// holds another owner's registration of r's worker.
	Heartbeat(ctx context.Context, r Registration) error
	// Deregister removes r. Removing an absent registration succeeds;
	// another owner's registration of r's worker is left in place, and
	// the error wraps ErrNotRegistered.
	Deregister(ctx context.Context, r Registration) error
	// Claim reads the registration of r's worker that the backend holds,
	// whoever wrote it; ok is false when it holds none.
	Claim(ctx context.Context, r Registration) (c Claim, ok bool, err error)
	// TTL is how long a registration stays passing after Register or
	// Heartbeat; the Announcer renews every third of it.
	TTL() time.Duration
	// String names the backend for logs.
	String() string
}

// Claim is what a backend holds of one worker's registration, as a writer
// that may not own it sees it.
type Claim struct {
	// Owner is the owner token of the vigil that wrote it; empty when the
	// registration has none (not written by a vigil).
	Owner string
	// Address and Port are the worker endpoint it advertises.
	Address string
	Port    int
	// Renewal changes each time the owner renews the registration (Consul:
	// the TTL check's output, which holds a renewal count; file: the
	// record's heartbeat time).
	Renewal string
	// Stale is true when the backend itself has found the registration
	// unrenewed for a TTL: Consul's TTL check is critical, the record's
	// expiry has passed.
	Stale bool
	// TTL is the registration's TTL as its writer published it (file:
	// expires − heartbeat); 0 when the backend does not say (Consul, whose
	// TTL check turns critical on its own).
	TTL time.Duration
}

// Addr is the advertised worker endpoint as host:port.
func (c Claim) Addr() string { return net.JoinHostPort(c.Address, strconv.Itoa(c.Port)) }

// ConflictError is why an Announcer gives up: another vigil holds the
// registration of its worker and renewed it while the Announcer watched,
// so both were given one worker id. Nothing of the other's was changed.
type ConflictError struct {
	// Worker is the registration the Announcer was to publish.
	Worker Registration
	// Other is the other vigil's registration, as last read.
	Other Claim
	// Watched is how long the Announcer watched before it saw a renewal.
	Watched time.Duration
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("worker id %q of service %q is registered by another live vigil, advertising %s (owner %s), which renewed it within %s",
		e.Worker.WorkerID, e.Worker.Service, e.Other.Addr(), ownerName(e.Other.Owner), e.Watched.Round(time.Millisecond))
}

// ownerName is an owner token for messages.
func ownerName(owner string) string {
	if owner == "" {
		return "none"
	}
	return owner
}
