package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/router"
	"google.golang.org/grpc/codes"
)

// Router is the metrics of `vigil route`: a router.Observer. Its label
// values come from discovery (models, worker ids) and gRPC's codes, never
// from a client's free text (see router.Observer).
type Router struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	ttft     *prometheus.HistogramVec
	retries  *prometheus.CounterVec

	mu      sync.Mutex
	workers func() []discovery.Registration
}

// NewRouter returns vigil route's metrics, version being vigil's.
func NewRouter(version string) *Router {
	r := &Router{reg: newRegistry(version)}
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
	r.reg.MustRegister(r.requests, r.ttft, r.retries, workersCollector{r})
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

// Request implements router.Observer.
func (r *Router) Request(model, worker string, code codes.Code) {
	r.requests.WithLabelValues(model, worker, codeLabel(code)).Inc()
}

// FirstToken implements router.Observer.
func (r *Router) FirstToken(model string, d time.Duration) {
	r.ttft.WithLabelValues(model).Observe(d.Seconds())
}

// Retry implements router.Observer.
func (r *Router) Retry(model string) { r.retries.WithLabelValues(model).Inc() }

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
// time: a model whose workers all left is gone from it at once.
type workersCollector struct{ r *Router }

var workersDesc = prometheus.NewDesc("vigil_route_workers",
	"Workers the router knows from discovery and can route to, by served model name.", []string{"model"}, nil)

func (c workersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- workersDesc }

func (c workersCollector) Collect(ch chan<- prometheus.Metric) {
	c.r.mu.Lock()
	current := c.r.workers
	c.r.mu.Unlock()
	if current == nil {
		return
	}
	n := map[string]int{}
	for _, ep := range current() {
		n[ep.Model]++
	}
	for model, k := range n {
		ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(k), model)
	}
}

var _ router.Observer = (*Router)(nil)
