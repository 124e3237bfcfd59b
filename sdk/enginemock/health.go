package enginemock

import (
	"errors"
	"maps"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Status is a health signal's status, in grpc.health.v1's terms: SERVING,
// NOT_SERVING or SERVICE_UNKNOWN (UNKNOWN is never set). Engines without
// grpc.health.v1 map it onto their own answer.
type Status = healthpb.HealthCheckResponse_ServingStatus

// Change is what Config.Publish hears after a change.
type Change struct {
	// Condition is the engine's condition after the change.
	Condition Condition
	// Health holds every signal's status after the change; Publish may keep it.
	Health map[string]Status
	// Changed lists the signals whose status changed, in Config.Signals
	// order then pin order; empty when only the condition or the instance
	// id changed.
	Changed []string
	// InstanceID is the engine's lifetime id after the change; see Replace.
	InstanceID string
}

var errStopped = errors.New("engine is stopped")

// Status returns a signal's status now; SERVICE_UNKNOWN for a signal the
// engine does not have.
func (e *Engine) Status(signal string) Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st, ok := e.status[signal]; ok {
		return st
	}
	return healthpb.HealthCheckResponse_SERVICE_UNKNOWN
}

// applyLocked brings every signal to the status the condition gives it,
// except those pinned by hand, and publishes the change.
func (e *Engine) applyLocked() {
	var changed []string
	for _, sig := range e.signals {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		switch {
		case e.cond.Stopped: // pinned or not
		case e.pinned[sig]:
			continue
		default:
			st = e.cfg.Health(sig, e.cond)
		}
		if e.setLocked(sig, st) {
			changed = append(changed, sig)
		}
	}
	e.publishLocked(changed)
}

func (e *Engine) setLocked(sig string, st Status) (changed bool) {
	if cur, ok := e.status[sig]; ok && cur == st {
		return false
	}
	e.status[sig] = st
	return true
}

// publishLocked stamps lastChange just before Publish hears of a health
// change, so benchmarks can measure detection latency from it.
func (e *Engine) publishLocked(changed []string) {
	if len(changed) > 0 {
		e.lastChange = time.Now().UnixNano()
	} else if e.published != nil && *e.published == e.cond && e.publishedID == e.instanceID {
		return
	}
	c := e.cond
	e.published, e.publishedID = &c, e.instanceID
	if e.cfg.Publish != nil {
		e.cfg.Publish(Change{Condition: c, Health: maps.Clone(e.status), Changed: changed, InstanceID: e.instanceID})
	}
}

// pin is POST /health: it sets sig to st until the engine stops, adding the
// signal if the engine lacks it.
func (e *Engine) pin(sig string, st Status) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cond.Stopped {
		return errStopped
	}
	if _, ok := e.status[sig]; !ok {
		e.signals = append(e.signals, sig)
	}
	e.pinned[sig] = true
	var changed []string
	if e.setLocked(sig, st) {
		changed = []string{sig}
	}
	e.publishLocked(changed)
	return nil
}
