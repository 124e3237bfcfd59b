package router

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Observer is told what the Proxy does, for metrics (vigil route
// --metrics-listen). Its methods are called on the requests' goroutines and
// must not block. Model labels are bounded by what discovery and --model
// name, never a client's free text: a request's model is the served model
// name of the worker that took it, else the model it asked for when the
// pool knows it (Pool.Known), else "".
type Observer interface {
	// Workers is given, once, by NewProxy, the pool's current workers
	// (Pool.Workers), for a gauge read at scrape time.
	Workers(current func() []discovery.Registration)
	// Request: a Generate request ended with code, worker being the id of
	// the last worker tried ("" when none was).
	Request(model, worker string, code codes.Code)
	// FirstToken: a request's first chunk reached its client d after the
	// router took the request, retries included.
	FirstToken(model string, d time.Duration)
	// Retry: a request refused before its first message is tried on
	// another worker.
	Retry(model string)
	// Models is given, once, by NewProxy, the models the pool knows
	// (Pool.KnownModels), for the gauge to read 0 for those no worker
	// serves now.
	Models(known func() []string)
	// Refused: a request was refused before any worker was tried, for one
	// of RefusalReasons.
	Refused(reason string)
}

// The reasons a request is refused before routing (Observer.Refused).
const (
	// RefusedUnauthorized: no API key, or a wrong one (HTTP 401).
	RefusedUnauthorized = "unauthorized"
	// RefusedInvalid: a bad request (its body, a field, the method, a
	// prompt its model's workers cannot take; HTTP 400 and 405).
	RefusedInvalid = "invalid"
	// RefusedTooLarge: a body over --max-body-bytes or a request over the
	// workers' message limit (HTTP 413).
	RefusedTooLarge = "too_large"
	// RefusedUnknownModel: no worker serves the model, nor did within the
	// memory (NOT_FOUND, HTTP 404).
	RefusedUnknownModel = "unknown_model"
	// RefusedNoWorker: no worker of the model can be tried now
	// (UNAVAILABLE, HTTP 503).
	RefusedNoWorker = "no_worker"
)

// RefusalReasons are the reasons of Observer.Refused, each a bounded label
// value.
var RefusalReasons = []string{RefusedUnauthorized, RefusedInvalid, RefusedTooLarge, RefusedUnknownModel, RefusedNoWorker}

// refusal is the reason of the pool's error for a request it found no
// worker to try for.
func refusal(err error) string {
	switch status.Code(err) {
	case codes.NotFound:
		return RefusedUnknownModel
	case codes.InvalidArgument:
		return RefusedInvalid
	}
	return RefusedNoWorker
}

// badRefusal is the reason of a request that parsing refused.
func badRefusal(e *apiError) string {
	if e.status == http.StatusRequestEntityTooLarge {
		return RefusedTooLarge
	}
	return RefusedInvalid
}

// refused tells the Observer, if any, of a request refused for reason.
func (p *Proxy) refused(reason string) {
	if o := p.cfg.Observer; o != nil {
		o.Refused(reason)
	}
}

// refuse notes the reason a request was refused before routing; r may be
// nil (no Observer).
func (r *observed) refuse(reason string) {
	if r != nil {
		r.refused = reason
	}
}

// KnownModels returns the models the pool knows, sorted, each once: those
// of the current workers, those a worker served within the memory, and
// PoolConfig.Models.
func (p *Pool) KnownModels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	models := slices.Collect(maps.Keys(p.pinned))
	for m, at := range p.left {
		if now.Sub(at) <= p.memory {
			models = append(models, m)
		}
	}
	for m := range p.byModel {
		models = append(models, m)
	}
	slices.Sort(models)
	return slices.Compact(models)
}

// Known reports whether model is known though no worker may serve it now:
// a current worker serves it, one did within the memory, or it was given in
// PoolConfig.Models.
func (p *Pool) Known(model string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pinned[model] {
		return true
	}
	if at, ok := p.left[model]; ok && p.now().Sub(at) <= p.memory {
		return true
	}
	for _, ep := range p.eps {
		if ep.Model == model {
			return true
		}
	}
	return false
}
