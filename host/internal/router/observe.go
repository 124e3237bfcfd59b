package router

import (
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	"google.golang.org/grpc/codes"
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
