package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
	"github.com/vigilhq/vigil/sdk/enginemock"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// This file holds the reference: an engine (enginemock's, with grpc-go's
// health server and a generation service of its own) and an adapter for it
// on the adapterkit that follows every rule, unless a fault breaks one.

// refReady is the engine's readiness service; "" is its liveness.
const refReady = "ref.Ready"

// refEngine is the reference engine. Its generation service, sdktest.Ref,
// carries well-known message types, so it needs no generated code:
// Generate takes {"id", "prompt", "max_tokens"} and streams {"tokens",
// "finish"}; Abort takes {"id"}.
type refEngine struct {
	*enginemock.Engine
	health *health.Server
}

func newRefEngine() *refEngine {
	e := &refEngine{health: health.NewServer()}
	e.Engine = enginemock.New(enginemock.Config{
		Model:   "ref-model",
		Signals: []string{"", refReady},
		Health: func(sig string, c enginemock.Condition) enginemock.Status {
			if !c.Ready || sig == refReady && (c.Sleeping || c.Paused) {
				return healthpb.HealthCheckResponse_NOT_SERVING
			}
			return healthpb.HealthCheckResponse_SERVING
		},
		Publish: func(c enginemock.Change) {
			for _, sig := range c.Changed {
				e.health.SetServingStatus(sig, c.Health[sig])
			}
		},
		Register: func(s *grpc.Server) error {
			healthpb.RegisterHealthServer(s, e.health)
			s.RegisterService(&refService, e)
			return nil
		},
	})
	return e
}

var refService = grpc.ServiceDesc{
	ServiceName: "sdktest.Ref",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Abort",
		Handler: func(srv any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req structpb.Struct
			if err := dec(&req); err != nil {
				return nil, err
			}
			srv.(*refEngine).Abort(req.GetFields()["id"].GetStringValue())
			return &emptypb.Empty{}, nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Generate",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			var req structpb.Struct
			if err := stream.RecvMsg(&req); err != nil {
				return err
			}
			f := req.GetFields()
			var prompt []uint32
			for _, v := range f["prompt"].GetListValue().GetValues() {
				prompt = append(prompt, uint32(v.GetNumberValue()))
			}
			gen := enginemock.Request{ID: f["id"].GetStringValue(), Prompt: prompt, MaxNewTokens: uint32(f["max_tokens"].GetNumberValue())}
			return srv.(*refEngine).Generate(stream.Context(), gen, func(c enginemock.Chunk) error {
				tokens := make([]any, len(c.Tokens))
				for i, id := range c.Tokens {
					tokens[i] = float64(id)
				}
				msg := map[string]any{"tokens": tokens}
				if c.Finish != nil {
					msg["finish"] = map[enginemock.FinishReason]string{
						enginemock.FinishLength:  "length",
						enginemock.FinishStop:    "stop",
						enginemock.FinishAborted: "cancelled",
					}[c.Finish.Reason]
				}
				s, err := structpb.NewStruct(msg)
				if err != nil {
					return status.Error(codes.Internal, err.Error())
				}
				return stream.SendMsg(s)
			})
		},
	}},
}

// refHarness is the Harness for the reference adapter with fault, every
// hook set, and the test binary as its executable (see TestMain).
func refHarness(f fault) sdktest.Harness {
	engines := map[string]*refEngine{}
	return sdktest.Harness{
		Name:       "ref",
		New:        func() sdk.Engine { return newRef(f) },
		Executable: testBinary,
		Serving: func(t *testing.T) (string, func()) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			e := newRefEngine()
			served := make(chan error, 1)
			go func() { served <- e.Serve(lis) }()
			t.Cleanup(func() {
				e.Stop()
				if err := <-served; err != nil {
					t.Errorf("reference engine Serve() = %v, want nil", err)
				}
			})
			engines[lis.Addr().String()] = e
			return lis.Addr().String(), e.Stop
		},
		Fail: func(_ *testing.T, addr string) {
			engines[addr].health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		},
		NotReady: func(_ *testing.T, addr string) { engines[addr].SetSleeping(true) },
		Ready:    func(_ *testing.T, addr string) { engines[addr].SetSleeping(false) },
		Hold:     func(t *testing.T, addr string) { engines[addr].Hold(1); t.Cleanup(engines[addr].Release) },
		Aborted:  func(_ *testing.T, addr, id string) <-chan struct{} { return engines[addr].Aborted(id) },
	}
}

// fault is one way the reference adapter breaks the contract; "" is none.
type fault string

const (
	faultInfo             fault = "wrong info"
	faultAddress          fault = "address not checked"
	faultOptions          fault = "unknown options accepted"
	faultStartTwice       fault = "second Start succeeds"
	faultDeadline         fault = "startup deadline unclassified"
	faultCloseWithoutLost fault = "watch closed without Lost"
	faultShutdownTwice    fault = "second Shutdown fails"
	faultNoGenerator      fault = "Generate claimed, not implemented"
	faultLateChunk        fault = "chunk after the final one"
	faultIgnoreCancel     fault = "Generate ignores ctx"
	faultOwnTimeout       fault = "checks with a deadline of its own"
	faultStreamLeftOpen   fault = "Generate returns on ctx and leaves the engine stream open"
	faultRefusesIgnoreEOS fault = "refuses IgnoreEOS without naming it"
	faultLogprobsShort    fault = "a logprob short per chunk, the prompt's first known"
	// noAbortCall is no fault: an adapter for an engine without an abort
	// call, which takes the stream's close for the abort.
	noAbortCall fault = "no abort call"
)

// ref is the reference adapter.
type ref struct {
	*adapterkit.Adapter
	fault fault

	mu        sync.Mutex
	worker    *sdk.Worker           // the first Start's, for faultStartTwice
	shutdowns int                   // for faultShutdownTwice
	stale     func(sdk.Chunk) error // a returned Generate's send, for faultLateChunk
}

var (
	_ sdk.Engine    = (*ref)(nil)
	_ sdk.Generator = (*ref)(nil)
)

// newRef returns the reference adapter, broken by f.
func newRef(f fault) sdk.Engine {
	r := &ref{fault: f, Adapter: adapterkit.New(adapterkit.Spec{
		Info:   sdk.AdapterInfo{Name: "ref", Version: "0.0.1", Capabilities: sdk.Capabilities{Readiness: true, Generate: true, Abort: f != noAbortCall}},
		Engine: "Ref",
		Signals: func(_ context.Context, conn *grpc.ClientConn, _ map[string]string) ([]adapterkit.Signal, error) {
			return []adapterkit.Signal{
				adapterkit.HealthService(conn, "", adapterkit.Liveness),
				adapterkit.HealthService(conn, refReady, adapterkit.Readiness),
			}, nil
		},
		ReadWorker: func(context.Context, *grpc.ClientConn) (sdk.Worker, error) {
			return sdk.Worker{ModelID: "ref-model", ServedModelName: "ref-model", Accepts: "logprobs=2,prompt_logprobs=2"}, nil
		},
	})}
	if f == faultNoGenerator {
		return struct{ sdk.Engine }{r} // Info still claims Generate
	}
	return r
}

func (r *ref) Info(ctx context.Context) (sdk.AdapterInfo, error) {
	if r.fault == faultInfo {
		return sdk.AdapterInfo{Name: "wrong"}, nil
	}
	return r.Adapter.Info(ctx)
}

func (r *ref) Start(ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	switch r.fault {
	case faultAddress:
		if _, _, err := net.SplitHostPort(req.EngineAddr); err != nil {
			return sdk.Worker{}, fmt.Errorf("waiting for engine at %s: %v", req.EngineAddr, err)
		}
	case faultOptions:
		req.Options = nil
	case faultOwnTimeout:
		req.Health.Timeout = 100 * time.Millisecond
	case faultStartTwice:
		r.mu.Lock()
		w := r.worker
		r.mu.Unlock()
		if w != nil {
			return *w, nil
		}
	}
	w, err := r.Adapter.Start(ctx, req)
	if r.fault == faultDeadline && errors.Is(err, sdk.ErrStartupDeadline) {
		return w, errors.New(strings.ReplaceAll(err.Error(), sdk.ErrStartupDeadline.Error(), "gave up"))
	}
	if err == nil {
		r.mu.Lock()
		r.worker = &w
		r.mu.Unlock()
	}
	return w, err
}

func (r *ref) WatchAvailability(ctx context.Context) (<-chan sdk.Event, error) {
	events, err := r.Adapter.WatchAvailability(ctx)
	if err != nil || r.fault != faultCloseWithoutLost {
		return events, err
	}
	out := make(chan sdk.Event)
	go func() {
		defer close(out)
		for ev := range events {
			if ev.Availability == sdk.Lost {
				return // closes without saying so
			}
			select {
			case out <- ev:
			case <-ctx.Done():
			}
		}
	}()
	return out, nil
}

func (r *ref) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.shutdowns++
	n := r.shutdowns
	r.mu.Unlock()
	if r.fault == faultShutdownTwice && n > 1 {
		return errors.New("already shut down")
	}
	return r.Adapter.Shutdown(ctx)
}

func (r *ref) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	switch r.fault {
	case faultIgnoreCancel:
		ctx = context.WithoutCancel(ctx)
	case faultLateChunk:
		// The last request's send gets one more chunk when the next begins.
		r.mu.Lock()
		stale := r.stale
		r.stale = nil
		r.mu.Unlock()
		if stale != nil {
			_ = stale(sdk.Chunk{TokenIDs: []uint32{1}})
		}
		defer func() {
			r.mu.Lock()
			r.stale = send
			r.mu.Unlock()
		}()
	}
	if req.TokenIDs == nil {
		return sdk.Result{}, fmt.Errorf("%w: prompt: the reference engine takes token ids only", sdk.ErrInvalidArgument)
	}
	if req.IgnoreEOS && r.fault == faultRefusesIgnoreEOS {
		return sdk.Result{}, fmt.Errorf("%w: the engine does not ignore the end of sequence", sdk.ErrInvalidArgument)
	}
	if r.fault == faultStreamLeftOpen {
		return r.leaveOpen(ctx, req, send)
	}
	return r.relay(ctx, req, send)
}

// leaveOpen returns when ctx ends, telling the engine nothing: its stream,
// opened without ctx, stays open.
func (r *ref) leaveOpen(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	type outcome struct {
		res sdk.Result
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		res, err := r.relay(context.WithoutCancel(ctx), req, send)
		out <- outcome{res, err}
	}()
	select {
	case o := <-out:
		return o.res, o.err
	case <-ctx.Done():
		return sdk.Result{}, ctx.Err()
	}
}

// addLogprobs adds what req asks of logprobs to c, the prompt's with the
// first chunk: the reference engine's are enginemock.PositionLogprobs.
func (r *ref) addLogprobs(c *sdk.Chunk, req sdk.GenerateRequest, first bool) {
	l := req.Logprobs
	if l == nil {
		return
	}
	if l.Output {
		c.Logprobs = refLogprobs(c.TokenIDs, l.Top)
		if r.fault == faultLogprobsShort && len(c.Logprobs) > 0 {
			c.Logprobs = c.Logprobs[1:]
		}
	}
	if l.Prompt && first {
		c.PromptLogprobs = refLogprobs(req.TokenIDs, l.PromptTop)
		if r.fault != faultLogprobsShort {
			c.PromptLogprobs[0] = sdk.TokenLogprob{Chosen: sdk.Logprob{TokenID: req.TokenIDs[0], Unknown: true}}
		}
	}
}

func refLogprobs(ids []uint32, top uint32) []sdk.TokenLogprob {
	out := make([]sdk.TokenLogprob, len(ids))
	for i, id := range ids {
		d := enginemock.PositionLogprobs(id, int(top))
		out[i].Chosen = sdk.Logprob{TokenID: id, Logprob: d.Chosen.Logprob, Rank: d.Chosen.Rank}
		for _, e := range d.Top {
			out[i].Top = append(out[i].Top, sdk.Logprob{TokenID: e.TokenID, Logprob: e.Logprob, Rank: e.Rank})
		}
	}
	return out
}

// relay forwards req to the engine with adapterkit.Relay.
func (r *ref) relay(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	conn, err := r.Conn()
	if err != nil {
		return sdk.Result{}, err
	}
	var abort func(context.Context, string) error
	switch r.fault {
	case noAbortCall:
	case faultStreamLeftOpen:
		abort = func(context.Context, string) error { return nil }
	default:
		abort = func(ctx context.Context, id string) error { return r.Abort(ctx, []string{id}) }
	}
	return adapterkit.Relay(ctx, adapterkit.Generation[structpb.Struct]{
		Engine:    "Ref",
		RequestID: req.RequestID,
		Open: func(ctx context.Context) (adapterkit.Stream[structpb.Struct], error) {
			prompt := make([]any, len(req.TokenIDs))
			for i, id := range req.TokenIDs {
				prompt[i] = float64(id)
			}
			in, err := structpb.NewStruct(map[string]any{"id": req.RequestID, "prompt": prompt, "max_tokens": float64(req.MaxTokens)})
			if err != nil {
				return nil, err
			}
			cs, err := conn.NewStream(ctx, &refService.Streams[0], "/sdktest.Ref/Generate")
			if err != nil {
				return nil, err
			}
			if err := cs.SendMsg(in); err != nil {
				return nil, err
			}
			if err := cs.CloseSend(); err != nil {
				return nil, err
			}
			return &grpc.GenericClientStream[structpb.Struct, structpb.Struct]{ClientStream: cs}, nil
		},
		Next: func(msg *structpb.Struct, res *sdk.Result) sdk.Chunk {
			var c sdk.Chunk
			for _, v := range msg.GetFields()["tokens"].GetListValue().GetValues() {
				c.TokenIDs = append(c.TokenIDs, uint32(v.GetNumberValue()))
			}
			r.addLogprobs(&c, req, res.CompletionTokens == 0)
			res.CompletionTokens += uint32(len(c.TokenIDs))
			switch msg.GetFields()["finish"].GetStringValue() {
			case "length":
				res.FinishReason = sdk.FinishLength
			case "stop":
				res.FinishReason = sdk.FinishStop
			case "cancelled":
				res.FinishReason = sdk.FinishCancelled
			}
			return c
		},
		Abort: abort,
	}, send)
}

func (r *ref) Abort(ctx context.Context, ids []string) error {
	conn, err := r.Conn()
	if err != nil {
		return err
	}
	for _, id := range ids {
		in, err := structpb.NewStruct(map[string]any{"id": id})
		if err != nil {
			return err
		}
		if err := conn.Invoke(ctx, "/sdktest.Ref/Abort", in, &emptypb.Empty{}); err != nil {
			return adapterkit.Classify("Ref", err, false)
		}
	}
	return nil
}
