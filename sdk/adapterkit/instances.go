package adapterkit

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// ProbeInterval is how often, at most, Start opens a new connection to an
// engine that answers but does not serve: with two engine processes on one
// port (SO_REUSEPORT, the default of Python gRPC servers), such as an old
// one draining NOT_SERVING beside its replacement, a connection stays with
// the process it reached, and only a new one can reach the other.
const ProbeInterval = time.Second

// instances is what Start saw of the engine processes answering on its
// address: the lifetime ids of those that answered without serving.
type instances struct {
	log        hclog.Logger
	engine     string
	addr       string
	clock      healthwatch.Clock
	tracker    *connTracker
	read       func(context.Context, *grpc.ClientConn) (string, error) // nil: no lifetime id
	notServing []string
	dropped    time.Time
}

// answeredNotServing notes the lifetime id of a process that answered
// without serving, and drops the connection once per ProbeInterval so the
// next attempt may reach another process.
func (s *instances) answeredNotServing(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) {
	if s.read != nil {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		id, err := s.read(rctx, conn)
		cancel()
		if err == nil && id != "" && !slices.Contains(s.notServing, id) {
			s.notServing = append(s.notServing, id)
			if len(s.notServing) > 1 {
				s.log.Warn("more than one engine process answers on the engine address (SO_REUSEPORT?); none serves yet",
					"engine", s.engine, "engine_addr", s.addr, "not_serving_instance_ids", s.notServing)
			}
		}
	}
	if now := s.clock.Now(); now.Sub(s.dropped) >= ProbeInterval {
		s.dropped = now
		s.tracker.drop()
	}
}

// taken logs which process Start took when others answered without
// serving.
func (s *instances) taken(id string) {
	others := slices.DeleteFunc(slices.Clone(s.notServing), func(o string) bool { return o == id })
	if len(others) == 0 {
		return
	}
	s.log.Warn("two engine processes answer on the engine address (SO_REUSEPORT?): took the one that serves",
		"engine", s.engine, "engine_addr", s.addr, "instance_id", id, "not_serving_instance_ids", others)
}
