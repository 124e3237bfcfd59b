package mock

import (
	"encoding/json"
	"sync"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// stateStream holds the latest engine state snapshot and wakes the
// WatchEngineState streams when it changes. Publish runs under the kit's
// lock and must not block: each stream has a one-slot wake-up channel and
// reads the latest snapshot itself, so a slow reader skips to the newest.
type stateStream struct {
	mu       sync.Mutex
	latest   *sglangpb.EngineStateSnapshot
	revision uint64
	stopped  bool // latest is a stopped engine's last snapshot
	watchers map[chan struct{}]struct{}
}

func newStateStream() *stateStream {
	return &stateStream{watchers: map[chan struct{}]struct{}{}}
}

func (s *stateStream) publish(snap *sglangpb.EngineStateSnapshot, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revision++
	snap.Revision = s.revision
	s.latest, s.stopped = snap, stopped
	for w := range s.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (s *stateStream) current() (*sglangpb.EngineStateSnapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest, s.stopped
}

func (s *stateStream) subscribe() (chan struct{}, func()) {
	w := make(chan struct{}, 1)
	s.mu.Lock()
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	return w, func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}
}

// watch sends the current snapshot, then each newer one, in layout, until
// the client leaves or the engine stops (after its last, unhealthy
// snapshot).
func (s *stateStream) watch(stream grpc.ServerStreamingServer[sglangpb.EngineStateSnapshot], layout Layout) error {
	wake, unsubscribe := s.subscribe()
	defer unsubscribe()
	var sent uint64
	for {
		snap, stopped := s.current()
		if snap.GetRevision() > sent {
			var msg proto.Message = snap
			if layout == LayoutNew {
				msg = newLayout(snap)
			}
			if err := stream.SendMsg(msg); err != nil {
				return err
			}
			sent = snap.GetRevision()
		}
		if stopped {
			return nil
		}
		select {
		case <-wake:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

// newLayout renumbers a snapshot as the new layout does. It has no
// server_status: healthy is false unless the engine is UP.
func newLayout(s *sglangpb.EngineStateSnapshot) *sglangpb.NewEngineStateSnapshot {
	return &sglangpb.NewEngineStateSnapshot{
		InstanceId: s.GetInstanceId(),
		Revision:   s.GetRevision(),
		Healthy:    s.GetHealthy() && s.GetServerStatus() == sglangpb.ServerStatus_UP,
		IsPause:    s.GetIsPause(),
		ModelInfo:  s.GetModelInfo(),
		ServerInfo: s.GetServerInfo(),
	}
}

// snapshot is the engine's state after change c.
func (e *Engine) snapshot(c enginemock.Change) *sglangpb.EngineStateSnapshot {
	id, _ := ParseInstanceID(c.InstanceID) // checked by Serve
	live := c.Health[""] == healthpb.HealthCheckResponse_SERVING
	snap := &sglangpb.EngineStateSnapshot{
		InstanceId: id,
		Healthy:    live && c.Condition.Ready,
		IsPause:    c.Condition.Paused,
	}
	if !e.cfg.BareSnapshots {
		snap.ModelInfo, snap.ServerInfo = e.modelInfo(), e.serverInfo()
	}
	switch {
	case c.Condition.Stopped:
		snap.ServerStatus = sglangpb.ServerStatus_UNHEALTHY
	case !c.Condition.Ready:
		snap.ServerStatus = sglangpb.ServerStatus_STARTING
	case !live:
		snap.ServerStatus = sglangpb.ServerStatus_UNHEALTHY
	default:
		snap.ServerStatus = sglangpb.ServerStatus_UP
	}
	return snap
}

func (e *Engine) modelInfo() *sglangpb.GetModelInfoResponse {
	model := e.model()
	return &sglangpb.GetModelInfoResponse{
		ModelPath: model,
		JsonInfo:  mustJSON(map[string]any{"model_path": model, "tokenizer_path": model, "is_generation": e.cfg.EmbeddingDim == 0}),
	}
}

func (e *Engine) serverInfo() *sglangpb.GetServerInfoResponse {
	var ctxLen any // null: the model's own limit
	if e.cfg.ContextLength > 0 {
		ctxLen = e.cfg.ContextLength
	}
	model := e.model()
	return &sglangpb.GetServerInfoResponse{JsonInfo: mustJSON(map[string]any{
		"served_model_name": model, "model_path": model, "context_length": ctxLen, "version": "0.5.0-mock",
	})}
}

// ModelContextLength is the context length of the model the mock stands
// for, which applies when the server's context_length is null (Config.
// ContextLength 0): Llama 3.1's 131072 tokens.
const ModelContextLength = 131072

// contextLength is the limit requests are held to: the server's
// context_length, else the model's own.
func (e *Engine) contextLength() uint32 {
	if e.cfg.ContextLength > 0 {
		return e.cfg.ContextLength
	}
	return ModelContextLength
}

// model is Config.Model with the kit's default; the kit's engine may not
// exist yet when New publishes the first snapshot.
func (e *Engine) model() string {
	if e.cfg.Model == "" {
		return "mock-model"
	}
	return e.cfg.Model
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings, numbers and bools always marshal
	}
	return string(b)
}
