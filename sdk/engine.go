package sdk

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Engine is implemented by an engine adapter. Every method takes a context
// and returns when it is done; errors are built with the classes in
// errors.go so they keep their meaning across the plugin boundary.
type Engine interface {
	// Info describes the adapter. It must not touch the engine.
	Info(ctx context.Context) (AdapterInfo, error)

	// Start connects to the engine at req.EngineAddr and returns once the
	// engine serves, with what the engine reports about itself. It first
	// rejects a bad request with an error wrapping ErrInvalidArgument, a
	// *FieldError naming the field: an EngineAddr that is not host:port
	// with a numeric port from 1 to 65535 (FieldEngineAddr), and an engine
	// option it does not know or whose value is bad (FieldOptions, naming
	// the key). It gives up with an error wrapping ErrStartupDeadline once
	// req.StartupDeadline has passed (a check under way may take its
	// HealthPolicy.Timeout more), and returns an error wrapping ctx's, not
	// ErrStartupDeadline, when ctx ends first. A second call fails with
	// ErrAlreadyStarted.
	Start(ctx context.Context, req StartRequest) (Worker, error)

	// WatchAvailability streams availability after a successful Start;
	// before it, it fails with ErrNotStarted. The first event is the
	// current state: what the engine reports when the watch begins, not
	// what Start saw. Later events are sent on change only, each with the
	// Time it was observed. NotReady comes only from an adapter with
	// Capabilities.Readiness, for an engine alive but taking no work;
	// Serving follows when it takes work again. Draining comes for an
	// engine that drains on purpose (see Draining); Lost may follow it, and
	// nothing else does that the host acts on. Lost comes for an engine
	// that failed (it reports so), shut down, or froze (found within the
	// HealthPolicy); it is the last event, and the adapter closes the
	// channel after it. When ctx ends the adapter closes the channel
	// without a further event. It closes it at no other time: the host
	// takes a channel closed without a Lost event for a lost engine, but
	// that close is a broken adapter, which sdktest reports.
	WatchAvailability(ctx context.Context) (<-chan Event, error)

	// Shutdown releases the adapter's connections to the engine. It does not
	// stop the engine. It is idempotent.
	Shutdown(ctx context.Context) error
}

// AdapterInfo describes an adapter.
type AdapterInfo struct {
	// Name is the engine name the host selects the adapter by, e.g. "vllm".
	Name string
	// Version is the adapter's version, free form.
	Version string
	// Capabilities lists optional behaviour.
	Capabilities Capabilities
}

// Capabilities lists what an adapter does beyond the required methods.
type Capabilities struct {
	// Readiness: the adapter reports NotReady for an engine that is alive
	// but not accepting work (asleep, paused). Without it, the adapter
	// never reports NotReady.
	Readiness bool
	// Generate: the adapter forwards generation requests: it implements
	// Generator.
	Generate bool
	// Abort: the adapter aborts a forwarded request by id with
	// Generator.Abort. It needs Generate.
	Abort bool
	// Embed: the adapter serves embeddings: it implements Embedder. The
	// host calls Embed only while Worker.Accepts lists CapEmbed.
	Embed bool
}

// CheckCapabilities reports, wrapping ErrUnimplemented, the capabilities c
// claims that e does not implement: Generate and Abort need e to be a
// Generator, Embed an Embedder. (Readiness needs an engine to check.) Serve's Info answers
// with this error, so that a host refuses such an adapter at startup
// rather than failing its first request.
func CheckCapabilities(e Engine, c Capabilities) error {
	if err := checkEmbedder(e, c); err != nil {
		return err
	}
	if _, ok := e.(Generator); ok {
		return nil
	}
	var claimed []string
	if c.Generate {
		claimed = append(claimed, "Generate")
	}
	if c.Abort {
		claimed = append(claimed, "Abort")
	}
	if len(claimed) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the adapter claims %s but does not implement sdk.Generator",
		ErrUnimplemented, strings.Join(claimed, " and "))
}

// StartRequest is what the host asks of Start.
type StartRequest struct {
	// EngineAddr is the engine's plaintext gRPC address, host:port.
	EngineAddr string
	// StartupDeadline bounds the wait for the engine to serve; 0 means
	// DefaultStartupDeadline.
	StartupDeadline time.Duration
	// Health tunes health watching; zero fields take the defaults.
	Health HealthPolicy
	// Options are engine specific; an adapter rejects keys it does not know,
	// and bad values, with a *FieldError for FieldOptions naming the key
	// (see Engine.Start).
	Options map[string]string
}

// DefaultStartupDeadline is how long Start waits for an engine by default:
// large models take tens of minutes to load.
const DefaultStartupDeadline = 30 * time.Minute

// HealthPolicy tunes how an adapter watches its engine.
//
// An adapter finds a frozen engine (its process stopped, its TCP connection
// still open) Lost within Interval + Failures*Timeout + Timeout/4 (one
// unanswered HTTP/2 PING, see BusyTimeout), 2.75 s with the defaults:
// checks run back to back after a failure, and an answer that comes within
// Timeout, however slow, is never a failure.
type HealthPolicy struct {
	// Interval is the time between liveness checks while checks succeed.
	// Default 500ms.
	Interval time.Duration
	// Timeout is the deadline of one check. Default 1s.
	Timeout time.Duration
	// Failures is the number of consecutive failed checks (timeout or error)
	// after which the engine is lost. Default 2.
	Failures int
	// RetryMax caps the retry backoff while Start waits for the engine, so an
	// engine that comes up after a long outage is found within RetryMax.
	// Default 50ms: an engine back within 100 ms of serving (B2), for about
	// 20 connection attempts a second while it is down.
	RetryMax time.Duration
	// BusyTimeout is how long an engine may be busy: its health checks
	// time out while its HTTP/2 transport still answers a PING, sent on a
	// connection of its own within Timeout/4 (a frozen process answers
	// none). Such a check is not a failure until the busy episode, from its
	// first timed-out check to the next answer, has lasted BusyTimeout; an
	// unanswered PING is a failure. At most 3 PINGs go out per episode, one
	// per BusyTimeout/3, so that servers that count pings (grpc-go's and
	// grpc C-core's keepalive enforcement) never send GOAWAY; a freeze in
	// mid-episode is found within BusyTimeout/3 plus the frozen bound.
	// Default 30s; negative turns it off (every timed-out check is a
	// failure), as net.Dialer.KeepAlive does.
	BusyTimeout time.Duration
	// Confirm is how long a liveness signal's status other than SERVING
	// (an answer, not a failed check) must hold before the engine is taken
	// for lost; a SERVING within it undoes it. It absorbs short health
	// blips at the cost of finding a real loss that much later. Readiness
	// (NotReady) is not held. Default 0: at once.
	Confirm time.Duration
}

// Health policy defaults; see HealthPolicy.
const (
	DefaultHealthInterval = 500 * time.Millisecond
	DefaultHealthTimeout  = time.Second
	DefaultHealthFailures = 2
	DefaultRetryMax       = 50 * time.Millisecond
	DefaultBusyTimeout    = 30 * time.Second
)

// WithDefaults returns p with its zero fields set to the defaults.
func (p HealthPolicy) WithDefaults() HealthPolicy {
	if p.Interval == 0 {
		p.Interval = DefaultHealthInterval
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultHealthTimeout
	}
	if p.Failures == 0 {
		p.Failures = DefaultHealthFailures
	}
	if p.RetryMax == 0 {
		p.RetryMax = DefaultRetryMax
	}
	if p.BusyTimeout == 0 {
		p.BusyTimeout = DefaultBusyTimeout
	}
	return p
}

// Validate reports the first field that is out of range as a *FieldError;
// a zero field is valid (it takes the default), and so is any BusyTimeout.
func (p HealthPolicy) Validate() error {
	const positive = "must be a positive duration"
	switch {
	case p.Interval < 0:
		return &FieldError{Field: FieldHealthInterval, Problem: fmt.Sprintf("%s: %s", p.Interval, positive)}
	case p.Timeout < 0:
		return &FieldError{Field: FieldHealthTimeout, Problem: fmt.Sprintf("%s: %s", p.Timeout, positive)}
	case p.Failures < 0:
		return &FieldError{Field: FieldHealthFailures, Problem: fmt.Sprintf("%d: must be 1 or more", p.Failures)}
	case p.RetryMax < 0:
		return &FieldError{Field: FieldHealthRetryMax, Problem: fmt.Sprintf("%s: %s", p.RetryMax, positive)}
	case p.Confirm < 0:
		return &FieldError{Field: FieldHealthConfirm, Problem: fmt.Sprintf("%s: %s or 0", p.Confirm, positive)}
	}
	return nil
}

// Worker is what the engine reports about itself; the host publishes it in
// discovery.
type Worker struct {
	// ModelID is the model id or path the engine loaded.
	ModelID string
	// ServedModelName is the name clients ask for.
	ServedModelName string
	// EngineVersion is the engine's software version.
	EngineVersion string
	// InstanceID is the engine's lifetime id, new on every engine start;
	// empty when the engine has none.
	InstanceID string
	// MaxModelLen is the longest sequence in tokens; 0 when unknown.
	MaxModelLen uint32
	// KVBlockSize is the KV cache block size in tokens; 0 when unknown.
	KVBlockSize uint32
	// SupportsTextInput is false for engines that take token ids only.
	SupportsTextInput bool
	// Accepts lists what the engine takes beyond the basic request, as
	// capability items separated by commas (docs/worker-api.md,
	// "Capabilities"), each a name or name=number: "top_k", "seed", "stop",
	// "presence_penalty", "logit_bias", "json_schema", "choice",
	// "grammar.ebnf", ...; "none" for none. (A string keeps Worker
	// comparable, as it was in v0.1.0.) The
	// host adds what it does itself (its tokenizer's stop strings, choice
	// as a regex, fan-out n) and publishes the whole; it sets a
	// GenerateRequest field only when its name is listed. "", from an
	// adapter that predates it, means the fields the sdk had before it
	// (discovery's legacy set).
	Accepts string
	// ReasoningParser and ToolCallParser name the parsers the engine is
	// set up with, where it reports them (vLLM's ModelInfo, from its
	// --reasoning-parser and --tool-call-parser), e.g. "qwen3" and
	// "hermes"; "" when the engine reports none. They are the worker's
	// defaults for vigil run's --reasoning-parser and --tool-call-parser:
	// the engine's gRPC API returns raw text, so the worker parses it.
	ReasoningParser string
	ToolCallParser  string
}

// Availability is the engine's state as the host acts on it. The numbers
// match vigil.plugin.v1.Availability.
type Availability int

const (
	// AvailabilityUnknown is never sent; receivers treat it as Lost.
	AvailabilityUnknown Availability = iota
	// Serving: the worker is registered.
	Serving
	// NotReady: the engine is alive but not accepting work; the worker is
	// withdrawn and vigil stays up.
	NotReady
	// Lost: the engine failed or shut down; the worker is withdrawn and
	// vigil exits 1.
	Lost
	// Draining: the engine drains on purpose: it reports that it no longer
	// serves while its connection and lifetime id hold, and finishes the
	// requests it has (vLLM's shutdown grace period, SGLang's runtime).
	// The worker is withdrawn at once and admits nothing new; requests in
	// flight run on while they make progress, and vigil exits 1 after the
	// last. Not terminal: Lost may follow. A host older than Draining takes
	// it for Lost.
	Draining
)

func (a Availability) String() string {
	switch a {
	case Serving:
		return "SERVING"
	case NotReady:
		return "NOT_READY"
	case Lost:
		return "LOST"
	case Draining:
		return "DRAINING"
	default:
		return "UNKNOWN"
	}
}

// ReasonStreamEnded is the Reason of the Lost event the sdk sends for an
// adapter whose availability stream ended without one, on either side of
// the plugin boundary: the host must not take silence for health, but the
// adapter broke the contract.
const ReasonStreamEnded = "adapter ended the availability stream"

// Event is one availability change.
type Event struct {
	Availability Availability
	// Reason says why, for logs.
	Reason string
	// Time is when the adapter observed the change.
	Time time.Time
	// Busy, with Serving only: the engine's liveness checks time out while
	// its connection still answers HTTP/2 PINGs (see
	// HealthPolicy.BusyTimeout). The worker stays registered; the host
	// exports it as a metric. A change of Busy alone is an event of its
	// own, with the same Availability.
	Busy bool
}
