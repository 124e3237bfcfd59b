package metrics

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/endpoint"
	"github.com/vigilhq/vigil/host/internal/supervisor"
	"github.com/vigilhq/vigil/sdk"
)

// The kinds of discovery errors (vigil_discovery_errors_total's kind).
const (
	KindTimeout          = "timeout"           // a call outlived its bound
	KindUnreachable      = "unreachable"       // the backend could not be reached (connection refused, no route)
	KindPermissionDenied = "permission_denied" // the backend refused the token (Consul ACL: HTTP 403)
	KindNotRegistered    = "not_registered"    // the backend no longer held the registration
	KindOther            = "other"
)

// Causes of a re-registration beyond the lifecycle's (supervisor.Cause*).
const (
	// CauseRegistryLost: the backend had lost the registration (a restarted
	// Consul agent, a deleted record file) and it was registered again.
	CauseRegistryLost = "registry_lost"
)

// ErrorKind classifies a discovery backend error for
// vigil_discovery_errors_total. It knows the backends only through
// package discovery: a backend marks its refusals of the token
// (Consul's HTTP 403) as discovery.ErrPermissionDenied.
func ErrorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, discovery.ErrNotRegistered):
		return KindNotRegistered
	case errors.Is(err, discovery.ErrPermissionDenied):
		return KindPermissionDenied
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return KindUnreachable
	case errors.As(err, new(*net.OpError)), errors.As(err, new(*net.DNSError)):
		return KindUnreachable
	}
	return KindOther
}

var (
	availabilities = []sdk.Availability{sdk.Serving, sdk.NotReady, sdk.Draining, sdk.Lost}
	states         = []supervisor.State{supervisor.StateLaunching, supervisor.StateWaiting, supervisor.StateStarted,
		supervisor.StatePreparing, supervisor.StateServing, supervisor.StateNotReady, supervisor.StateEngineDraining, supervisor.StateDraining, supervisor.StateStopped}
	withdrawCauses = []string{supervisor.CauseNotReady, supervisor.CauseLost, supervisor.CauseStop, supervisor.CauseFailed, supervisor.CauseDraining}
	reregCauses    = []string{supervisor.CauseNotReady, CauseRegistryLost}
	recoverCauses  = []string{supervisor.CauseLost, supervisor.CauseHung, supervisor.CauseDraining}
	errorKinds     = []string{KindTimeout, KindUnreachable, KindPermissionDenied, KindNotRegistered, KindOther}
)

// availabilityLabel is a's label value.
func availabilityLabel(a sdk.Availability) string {
	switch a {
	case sdk.Serving:
		return "serving"
	case sdk.NotReady:
		return "not_ready"
	case sdk.Draining:
		return "draining"
	default:
		return "lost"
	}
}

// stateLabel is st's label value: its name with _ for -.
func stateLabel(st supervisor.State) string {
	return strings.ReplaceAll(st.String(), "-", "_")
}

// Worker is the metrics of `vigil run`. It is a supervisor.Observer and an
// endpoint.Observer; Announcer is its discovery.AnnouncerObserver. Its
// methods are safe for concurrent use.
type Worker struct {
	reg *prometheus.Registry

	states       map[supervisor.State]prometheus.Gauge
	availability map[sdk.Availability]prometheus.Gauge
	requests     [endpoint.NumOutcomes]prometheus.Counter
	prompt       prometheus.Counter
	completion   prometheus.Counter
	withdrawals  map[string]prometheus.Counter
	reregistered map[string]prometheus.Counter
	errs         map[string]prometheus.Counter
	startupWait  prometheus.Histogram
	busy         prometheus.Gauge
	busyEpisodes prometheus.Counter
	toolFailures prometheus.Counter
	toolDropped  prometheus.Counter
	recoveries   map[string]prometheus.Counter
}

// WorkerSources are what Worker's gauges read at scrape time.
type WorkerSources struct {
	// InFlight is the number of requests in flight (endpoint.Server.InFlight).
	InFlight func() int
	// Registered reports whether the registry holds the worker's
	// registration (discovery.Announcer.Registered).
	Registered func() bool
	// Refused reports whether the registry refuses the worker's
	// registration for a reason retrying alone will not mend (a Consul
	// token without permission: discovery.Refused); nil: never.
	Refused func() bool
}

// oneOf is a gauge vector whose one label takes a value per key, 1 for the
// key that holds and 0 for the others, with each key's child resolved once.
func oneOf[K comparable](name, help, label string, keys []K, labelOf func(K) string) (*prometheus.GaugeVec, map[K]prometheus.Gauge) {
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{label})
	children := make(map[K]prometheus.Gauge, len(keys))
	for _, k := range keys {
		children[k] = vec.WithLabelValues(labelOf(k))
	}
	return vec, children
}

// NewWorker returns vigil run's metrics, version being vigil's.
func NewWorker(version string, src WorkerSources) *Worker {
	w := &Worker{reg: newRegistry(version)}
	var state, avail *prometheus.GaugeVec
	state, w.states = oneOf("vigil_lifecycle_state",
		"1 for the lifecycle state vigil is in, 0 for the others (launching, waiting, started, serving, not_ready, engine_draining, draining, stopped).",
		"state", states, stateLabel)
	avail, w.availability = oneOf("vigil_engine_availability",
		"1 for the engine's availability as the adapter last reported it (serving, not_ready, draining: on purpose, lost), 0 for the others; all 0 before its first report.",
		"availability", availabilities, availabilityLabel)
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_worker_requests_total",
		Help: "Generate requests the worker endpoint answered, by outcome (ok, refused, overloaded, invalid, cancelled, cut, failed).",
	}, []string{"outcome"})
	for o := range endpoint.NumOutcomes {
		w.requests[o] = requests.WithLabelValues(endpoint.Outcome(o).String())
	}
	w.prompt = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vigil_worker_prompt_tokens_total",
		Help: "Prompt tokens of the requests the worker forwarded, as the engine counted them.",
	})
	w.completion = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vigil_worker_completion_tokens_total",
		Help: "Completion tokens the engine generated for the worker's requests.",
	})
	withdrawals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_worker_withdrawals_total",
		Help: "Times the worker, serving, was withdrawn from discovery, by cause (not_ready: the engine asleep or paused; lost; stop; failed; draining: the engine drains on purpose).",
	}, []string{"cause"})
	w.withdrawals = children(withdrawals, withdrawCauses)
	rereg := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_worker_reregistrations_total",
		Help: "Times the worker was registered again, by why it had left discovery (not_ready: the engine served again; registry_lost: the registry had lost it).",
	}, []string{"cause"})
	w.reregistered = children(rereg, reregCauses)
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_discovery_errors_total",
		Help: "Failed registry calls (register, renew, deregister), by kind (timeout, unreachable, permission_denied, not_registered, other); each is retried.",
	}, []string{"kind"})
	w.errs = children(errs, errorKinds)
	w.startupWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "vigil_engine_startup_wait_seconds",
		Help:    "Time from the start of the wait for the engine to its serving (the adapter's Start), per engine start.",
		Buckets: []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800},
	})
	w.busy, w.busyEpisodes = busyMetrics()
	w.toolFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_tool_call_parse_failures_total",
		Help: "Tool calls in chat output returned as content: their arguments not a JSON object, or a function not offered."})
	w.toolDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_tool_calls_dropped_total",
		Help: "Tool calls dropped after a choice's first, for requests with parallel_tool_calls false."})
	recoveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_engine_recoveries_total",
		Help: "Times --on-loss=wait took vigil back to waiting for the engine after losing it, by cause (lost; hung: the adapter stopped answering; draining: the engine drained on purpose).",
	}, []string{"cause"})
	w.recoveries = children(recoveries, recoverCauses)
	gauges := sourceGauges(src)
	w.reg.MustRegister(append([]prometheus.Collector{state, avail, requests, w.prompt, w.completion, withdrawals, rereg, errs, w.startupWait, w.busy, w.busyEpisodes, w.toolFailures, w.toolDropped, recoveries}, gauges...)...)
	return w
}

// sourceGauges are the gauges read from src at scrape time.
func sourceGauges(src WorkerSources) []prometheus.Collector {
	inflight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vigil_worker_requests_in_flight",
		Help: "Requests the worker endpoint has admitted and not yet answered.",
	}, func() float64 { return float64(src.InFlight()) })
	registered := flag("vigil_worker_registered",
		"1 while the registry holds the worker's registration, as far as vigil knows; else 0.", src.Registered)
	refused := flag("vigil_worker_registration_refused",
		"1 while the registry refuses the worker's registration for want of a permission (a Consul token without service:write), which retrying alone will not mend; else 0.",
		src.Refused)
	return []prometheus.Collector{inflight, registered, refused}
}

// flag is a gauge that reads 1 while f reports true; nil f: always 0.
func flag(name, help string, f func() bool) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		if f != nil && f() {
			return 1
		}
		return 0
	})
}

// busyMetrics are vigil_engine_busy and vigil_engine_busy_episodes_total.
func busyMetrics() (prometheus.Gauge, prometheus.Counter) {
	return prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_engine_busy",
			Help: "1 while the adapter reports the serving engine busy: its liveness checks time out while its connection answers HTTP/2 PINGs (--health-busy-timeout); else 0.",
		}), prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_engine_busy_episodes_total",
			Help: "Times the adapter reported the serving engine busy.",
		})
}

// children resolves vec's child for each value of its one label.
func children(vec *prometheus.CounterVec, values []string) map[string]prometheus.Counter {
	m := make(map[string]prometheus.Counter, len(values))
	for _, v := range values {
		m[v] = vec.WithLabelValues(v)
	}
	return m
}

// Registry is the registry to serve.
func (w *Worker) Registry() *prometheus.Registry { return w.reg }

// Entered implements supervisor.Observer.
func (w *Worker) Entered(st supervisor.State) {
	for s, g := range w.states {
		if s == st {
			g.Set(1)
		} else {
			g.Set(0)
		}
	}
}

// Availability implements supervisor.Observer.
func (w *Worker) Availability(a sdk.Availability) {
	for x, g := range w.availability {
		if x == a {
			g.Set(1)
		} else {
			g.Set(0)
		}
	}
}

// EngineStarted implements supervisor.Observer.
func (w *Worker) EngineStarted(wait time.Duration) { w.startupWait.Observe(wait.Seconds()) }

// Withdrawn implements supervisor.Observer.
func (w *Worker) Withdrawn(cause string) { count(w.withdrawals, cause) }

// Reregistered implements supervisor.Observer.
func (w *Worker) Reregistered(cause string) { count(w.reregistered, cause) }

// Busy implements supervisor.Observer.
func (w *Worker) Busy(busy bool) {
	if busy {
		w.busy.Set(1)
		w.busyEpisodes.Inc()
		return
	}
	w.busy.Set(0)
}

// Recovered implements supervisor.Observer.
func (w *Worker) Recovered(cause string) { count(w.recoveries, cause) }

// Finished implements endpoint.Observer.
func (w *Worker) Finished(o endpoint.Outcome, prompt, completion uint32) {
	if int(o) >= 0 && int(o) < len(w.requests) {
		w.requests[o].Inc()
	}
	w.prompt.Add(float64(prompt))
	w.completion.Add(float64(completion))
}

// ToolCalls implements endpoint.ToolCallObserver.
func (w *Worker) ToolCalls(failures, dropped int) {
	w.toolFailures.Add(float64(failures))
	w.toolDropped.Add(float64(dropped))
}

// count increments m's child for v; a value not resolved up front is not
// counted (it would be a label the docs do not list).
func count(m map[string]prometheus.Counter, v string) {
	if c, ok := m[v]; ok {
		c.Inc()
	}
}

// Announcer is the discovery.AnnouncerObserver feeding w.
func (w *Worker) Announcer() discovery.AnnouncerObserver { return announcerObserver{w} }

type announcerObserver struct{ w *Worker }

func (a announcerObserver) Failed(err error) { count(a.w.errs, ErrorKind(err)) }
func (a announcerObserver) Reregistered()    { count(a.w.reregistered, CauseRegistryLost) }

var (
	_ supervisor.Observer         = (*Worker)(nil)
	_ endpoint.Observer           = (*Worker)(nil)
	_ discovery.AnnouncerObserver = announcerObserver{}
)
var _ endpoint.ToolCallObserver = (*Worker)(nil)
