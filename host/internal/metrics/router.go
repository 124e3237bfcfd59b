package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/router"
	"google.golang.org/grpc/codes"
)

// WorkerSeriesMemory is how long a worker's series (those labelled with its
// id) stay after it left discovery and its last request ended; then they
// are dropped, so that /metrics does not grow with every rollout (vector
// #19125). It is the router's memory of a model (router.DefaultModelMemory):
// long enough for every scrape (15 s to 1 min apart) to read a departed
// worker's last counts and for rate() over the usual 5 minutes to see them
// end, and for a worker restarted under its id to keep its counters.
const WorkerSeriesMemory = 10 * time.Minute

// Router is the metrics of `vigil route`: a router.Observer. Its label
// values come from discovery (models, worker ids), gRPC's codes and
// router.RefusalReasons, never from a client's free text (see
// router.Observer).
type Router struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	ttft     *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	migrated *prometheus.CounterVec
	refused  map[string]prometheus.Counter
	now      func() time.Time

	mu      sync.Mutex
	workers func() []discovery.Registration
	models  func() []string
	// seen is when each worker id with series was last current or ended
	// a request.
	seen map[string]time.Time
}

// NewRouter returns vigil route's metrics, version being vigil's.
func NewRouter(version string) *Router {
	r := &Router{reg: newRegistry(version), now: time.Now, seen: map[string]time.Time{}, refused: map[string]prometheus.Counter{}}
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_route_requests_total",
		Help: "Generate requests (gRPC and HTTP completions) the router answered, by model, worker id (\"\" when none was tried) and gRPC status code.",
	}, []string{"model", "worker", "status"})
	r.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vigil_route_time_to_first_token_seconds",
		Help:    "Time from the router taking a request to its first chunk reaching the client, retries included, by model.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"model"})
	r.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_route_retries_total",
		Help: "Requests tried on another worker after one refused them before their first message, by model.",
	}, []string{"model"})
	r.migrated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_route_stream_migrations_total",
		Help: "Streams moved to another worker because theirs could not finish them, by model and result: resumed (another worker went on) or failed (none did; the client got the failure).",
	}, []string{"model", "result"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_route_refused_total",
		Help: "Requests refused before any worker was tried, by reason: unauthorized, invalid, too_large, unknown_model, no_worker.",
	}, []string{"reason"})
	for _, reason := range router.RefusalReasons {
		r.refused[reason] = refused.WithLabelValues(reason)
	}
	r.reg.MustRegister(sweeping{r}, r.ttft, r.retries, r.migrated, refused, workersCollector{r})
	return r
}

// Registry is the registry to serve.
func (r *Router) Registry() *prometheus.Registry { return r.reg }

// Workers implements router.Observer.
func (r *Router) Workers(current func() []discovery.Registration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workers = current
}

// Models implements router.Observer.
func (r *Router) Models(known func() []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.models = known
}

// Request implements router.Observer.
func (r *Router) Request(model, worker string, code codes.Code) {
	if worker != "" {
		now := r.now()
		r.mu.Lock()
		r.seen[worker] = now
		r.mu.Unlock()
	}
	r.requests.WithLabelValues(model, worker, codeLabel(code)).Inc()
}

// FirstToken implements router.Observer.
func (r *Router) FirstToken(model string, d time.Duration) {
	r.ttft.WithLabelValues(model).Observe(d.Seconds())
}

// Retry implements router.Observer.
func (r *Router) Retry(model string) { r.retries.WithLabelValues(model).Inc() }

// Migration implements router.MigrationObserver; a result not in
// router.MigrationResults is not counted.
func (r *Router) Migration(model, result string) {
	if slices.Contains(router.MigrationResults, result) {
		r.migrated.WithLabelValues(model, result).Inc()
	}
}

// Refused implements router.Observer; a reason not in
// router.RefusalReasons is not counted.
func (r *Router) Refused(reason string) {
	if c, ok := r.refused[reason]; ok {
		c.Inc()
	}
}

// sweeping collects vigil_route_requests_total after dropping the series
// of the workers unseen for WorkerSeriesMemory (Router.sweep), so that a
// scrape never shows them.
type sweeping struct{ r *Router }

func (s sweeping) Describe(ch chan<- *prometheus.Desc) { s.r.requests.Describe(ch) }

func (s sweeping) Collect(ch chan<- prometheus.Metric) {
	s.r.mu.Lock()
	workers := s.r.workers
	s.r.mu.Unlock()
	var current []discovery.Registration
	if workers != nil {
		current = workers()
	}
	s.r.sweep(current)
	s.r.requests.Collect(ch)
}

// sweep notes the current workers as seen now and drops the series of
// those unseen for WorkerSeriesMemory.
func (r *Router) sweep(current []discovery.Registration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for _, ep := range current {
		r.seen[ep.WorkerID] = now
	}
	for id, at := range r.seen {
		if now.Sub(at) > WorkerSeriesMemory {
			r.requests.DeletePartialMatch(prometheus.Labels{"worker": id})
			delete(r.seen, id)
		}
	}
}

// codeLabel is code as gRPC's documentation spells it: OK, UNAVAILABLE, ...
func codeLabel(c codes.Code) string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return c.String()
}

var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

// workersCollector reports vigil_route_workers from the pool at scrape
// time, 0 for a model the pool knows with no worker now.
type workersCollector struct{ r *Router }

var workersDesc = prometheus.NewDesc("vigil_route_workers",
	"Workers the router knows from discovery and can route to, by served model name; 0 for a model known with none (one served it within 10 minutes, or --model names it).",
	[]string{"model"}, nil)

func (c workersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- workersDesc }

func (c workersCollector) Collect(ch chan<- prometheus.Metric) {
	c.r.mu.Lock()
	workers, models := c.r.workers, c.r.models
	c.r.mu.Unlock()
	if workers == nil {
		return
	}
	current := workers()
	n := map[string]int{}
	if models != nil {
		for _, m := range models() {
			n[m] = 0
		}
	}
	for _, ep := range current {
		n[ep.Model]++
	}
	for model, k := range n {
		ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(k), model)
	}
}

var _ router.Observer = (*Router)(nil)
