package adapterkit

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// Role says what a signal that does not serve means.
type Role int

const (
	// Liveness: not serving means the engine is lost.
	Liveness Role = iota + 1
	// Readiness: not serving means the engine is alive but takes no work
	// (asleep, paused): NotReady.
	Readiness
	// Startup: Start waits for it; the watch does not follow it.
	Startup
)

func (r Role) String() string {
	switch r {
	case Liveness:
		return "liveness"
	case Readiness:
		return "readiness"
	case Startup:
		return "startup"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// down is the availability a signal in role r that does not serve stands
// for; drains: a Liveness signal's not serving is a drain on purpose.
func (r Role) down(drains bool) sdk.Availability {
	switch {
	case r == Readiness:
		return sdk.NotReady
	case drains:
		return sdk.Draining
	}
	return sdk.Lost
}

// ErrNotServing is wrapped by a Check whose engine answered that the signal
// does not serve, as opposed to a check that failed.
var ErrNotServing = errors.New("not serving")

// Signal is one health signal of an engine. One list of them drives both
// halves of an adapter built on the kit: Start waits until every signal
// serves, and the watch follows every signal but Startup ones. So nothing
// the watch would take for loss can hold while Start reports the engine
// serving.
type Signal struct {
	// Name names the signal in reasons and errors, e.g. `health of ""`.
	Name string
	// Role says what the signal not serving means.
	Role Role
	// Drains, for a Liveness signal: the engine's answer that it does not
	// serve is a drain on purpose (sdk.Draining), not a loss: the engine
	// finishes what it has (vLLM's shutdown grace period, SGLang's
	// runtime). A check that fails, the connection closing or another
	// lifetime id (LifetimeSource) are still Lost. Set by
	// DrainingHealthService; default false.
	Drains bool
	// Check asks once, under ctx's deadline (HealthPolicy.Timeout). It
	// returns nil when the signal serves; an error wrapping ErrNotServing
	// when the engine answers that it does not; any other error when the
	// check failed (refused, timed out, an error status). Start retries
	// every error until the startup deadline. When Watch is nil the watch
	// polls Check (healthwatch.Poll): a not-serving answer is reported at
	// once, other errors count toward HealthPolicy.Failures. Required.
	Check func(ctx context.Context) error
	// Watch, if set, follows the signal after Start instead of polling
	// Check. It sends the current state first, then every change, as an
	// sdk.Event whose Availability already applies Role, and closes its
	// channel after Lost or when ctx ends. Reasons name the signal.
	Watch func(ctx context.Context, policy sdk.HealthPolicy) <-chan sdk.Event
}

// HealthService is service of the engine's standard grpc.health.v1.Health
// as a Signal. Check waits, within its deadline, for the connection to be
// ready (healthwatch.ReadyChecker), so a waiting Start sees an engine one
// reconnect after it listens. Watch is healthwatch.Watch: a status other
// than SERVING is Role's down state, a failed watch is Lost.
func HealthService(conn grpc.ClientConnInterface, service string, role Role) Signal {
	return healthService(conn, service, role, false)
}

// DrainingHealthService is HealthService for a liveness service that
// turns NOT_SERVING when the engine drains on purpose, before it finishes
// the requests it has (Signal.Drains): NOT_SERVING is sdk.Draining while
// the connection holds.
func DrainingHealthService(conn grpc.ClientConnInterface, service string) Signal {
	return healthService(conn, service, Liveness, true)
}

func healthService(conn grpc.ClientConnInterface, service string, role Role, drains bool) Signal {
	name := fmt.Sprintf("health of %q", service)
	check := healthwatch.ReadyChecker(conn)
	return Signal{
		Name:   name,
		Role:   role,
		Drains: drains,
		Check: func(ctx context.Context) error {
			st, err := check(ctx, service)
			if err == nil && st != healthpb.HealthCheckResponse_SERVING {
				err = fmt.Errorf("%w: %s", ErrNotServing, st)
			}
			return err
		},
		Watch: func(ctx context.Context, policy sdk.HealthPolicy) <-chan sdk.Event {
			return watchHealth(ctx, conn, service, role, drains, policy, watchOptionsOf(ctx))
		},
	}
}

// watchHealth is HealthService's Watch: healthwatch.WatchWith, with a
// liveness signal's statuses other than SERVING held for policy.Confirm;
// drains: its NOT_SERVING is a drain on purpose.
func watchHealth(ctx context.Context, conn grpc.ClientConnInterface, service string, role Role, drains bool, policy sdk.HealthPolicy, opts healthwatch.WatchOptions) <-chan sdk.Event {
	name := fmt.Sprintf("health of %q", service)
	updates := healthwatch.WatchWith(ctx, conn, service, policy, opts)
	if role != Readiness {
		updates = hold(ctx, updates, policy.Confirm, func(u healthwatch.Update) bool {
			return u.Err == nil && u.Status != healthpb.HealthCheckResponse_SERVING
		})
	}
	return relayEvents(ctx, updates, func(u healthwatch.Update) sdk.Event {
		switch {
		case u.Err != nil:
			return event(sdk.Lost, u.Time, "%v", u.Err)
		case u.Status != healthpb.HealthCheckResponse_SERVING:
			return event(role.down(drains), u.Time, "%s is %s", name, u.Status)
		}
		return event(sdk.Serving, u.Time, "%s is SERVING", name)
	})
}

// Source returns s as Merge follows it under policy: its Watch, or else
// its Check polled.
func (s Signal) Source(policy sdk.HealthPolicy) Source {
	return s.source(policy, healthwatch.WatchOptions{})
}

// source is Source with opts.Busy judging the Checks that time out, for a
// Signal that polls them (its own, or HealthService's Watch's), and
// opts.Reopened confirming the lifetime id behind HealthService's
// reopened Watch streams.
func (s Signal) source(policy sdk.HealthPolicy, opts healthwatch.WatchOptions) Source {
	busy := opts.Busy
	if s.Watch != nil {
		return Source{Name: s.Name, Follow: func(ctx context.Context) <-chan sdk.Event {
			return s.Watch(context.WithValue(ctx, watchKey{}, opts), policy)
		}}
	}
	return Source{Name: s.Name, Follow: func(ctx context.Context) <-chan sdk.Event {
		polled := s.poll(ctx, policy, busy)
		if s.Role != Readiness {
			polled = hold(ctx, polled, policy.Confirm, func(p answer) bool { return p.down })
		}
		return relayEvents(ctx, polled, func(p answer) sdk.Event { return p.ev })
	}}
}

// watchKey is the context key of the options that the kit's own Watch
// functions (HealthService's) watch with: the Busy their Checks are
// polled with, and the lifetime check of their reopened streams. A
// Signal's Watch replaced by the adapter knows nothing of them.
type watchKey struct{}

// watchOptionsOf returns ctx's watch options; zero: none.
func watchOptionsOf(ctx context.Context) healthwatch.WatchOptions {
	o, _ := ctx.Value(watchKey{}).(healthwatch.WatchOptions)
	return o
}

// answer is one polled Check's event; down: the engine answered that the
// signal does not serve (what Confirm holds), not a failure.
type answer struct {
	ev   sdk.Event
	down bool
}

// poll polls s.Check with healthwatch.PollBusy, sending each answer, and
// Lost when the checks fail; it closes the channel after Lost or when ctx
// ends.
func (s Signal) poll(ctx context.Context, policy sdk.HealthPolicy, busy *healthwatch.Busy) <-chan answer {
	out := make(chan answer)
	send := func(p answer) {
		select {
		case out <- p:
		case <-ctx.Done():
		}
	}
	go func() {
		defer close(out)
		err := healthwatch.PollBusy(ctx, policy, func(cctx context.Context) error {
			err := s.Check(cctx)
			switch {
			case err == nil:
				send(answer{ev: event(sdk.Serving, timeNow(), "%s serves", s.Name)})
			case errors.Is(err, ErrNotServing):
				// An answer, not a failed check.
				send(answer{ev: event(s.Role.down(s.Drains), timeNow(), "%s: %v", s.Name, err), down: true})
				return nil
			}
			return err
		}, busy)
		if err != nil {
			send(answer{ev: event(sdk.Lost, timeNow(), "%s: %v", s.Name, err)})
		}
	}()
	return out
}
