package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"github.com/vigilhq/vigil/sdk/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pluginPaths are the two ways a request crosses the plugin boundary: a
// Generate call of its own (an adapter built with an sdk before
// Multiplex) and the shared Multiplex stream.
var pluginPaths = []struct {
	name string
	mux  bool
}{{"generate", false}, {"multiplex", true}}

// testPluginEngineOn is TestPluginEngine with the host's Generate using
// Multiplex when mux is set, whatever Info would say.
func testPluginEngineOn(t testing.TB, mux bool, impl Engine) Engine {
	t.Helper()
	e := TestPluginEngine(t, impl)
	e.(*engineClient).multiplex.Store(mux)
	return e
}

// countingServer is the sdk's adapter server with its RPCs counted, and
// with Multiplex hidden from Info and unimplemented when old is set, as in
// an adapter built with an sdk before Multiplex.
type countingServer struct {
	*engineServer
	old bool

	mu        sync.Mutex
	generates int
	muxes     int
	batches   []int // items per Multiplex message
}

func (s *countingServer) Generate(req *pluginv1.GenerateRequest, stream pluginv1.Engine_GenerateServer) error {
	s.mu.Lock()
	s.generates++
	s.mu.Unlock()
	return s.engineServer.Generate(req, stream)
}

func (s *countingServer) Multiplex(stream pluginv1.Engine_MultiplexServer) error {
	s.mu.Lock()
	s.muxes++
	s.mu.Unlock()
	if s.old {
		return status.Error(codes.Unimplemented, "unknown method Multiplex")
	}
	return s.engineServer.Multiplex(&countingMuxStream{Engine_MultiplexServer: stream, s: s})
}

type countingMuxStream struct {
	pluginv1.Engine_MultiplexServer
	s *countingServer
}

func (c *countingMuxStream) Send(m *pluginv1.MultiplexResponse) error {
	c.s.mu.Lock()
	c.s.batches = append(c.s.batches, len(m.GetItems()))
	c.s.mu.Unlock()
	return c.Engine_MultiplexServer.Send(m)
}

// countingPlugin serves a countingServer.
type countingPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *countingServer
}

func (p *countingPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginv1.RegisterEngineServer(s, p.srv)
	return nil
}

func (p *countingPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &engineClient{client: pluginv1.NewEngineClient(c)}, nil
}

// countingEngine returns the host's Engine for impl served by a
// countingServer, after the host's Info call, as the host makes it.
func countingEngine(t *testing.T, impl Engine, old bool) (*engineClient, *countingServer) {
	t.Helper()
	srv := &countingServer{engineServer: &engineServer{impl: impl, noMultiplex: old}, old: old}
	return servedEngine(t, srv), srv
}

// servedEngine returns the host's Engine for srv, after the host's Info
// call.
func servedEngine(t *testing.T, srv *countingServer) *engineClient {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{wire.PluginName: &countingPlugin{srv: srv}})
	t.Cleanup(func() {
		_ = client.Close()
		<-server.DoneCh
	})
	raw, err := client.Dispense(wire.PluginName)
	if err != nil {
		t.Fatalf("dispensing the engine plugin: %v", err)
	}
	e := raw.(*engineClient)
	if _, err := e.Info(t.Context()); err != nil {
		t.Fatalf("Info() = %v", err)
	}
	return e
}

// lockstep is an engine that, like a batching engine's decode step, gives
// every running request its next token in the same step: a request's
// token i goes out once all n requests have sent token i-1.
type lockstep struct {
	stubEngine
	n, tokens int
	steps     []sync.WaitGroup
}

func newLockstep(n, tokens int) *lockstep {
	l := &lockstep{
		stubEngine: stubEngine{info: func(context.Context) (AdapterInfo, error) {
			return AdapterInfo{Name: "lockstep", Capabilities: Capabilities{Generate: true}}, nil
		}},
		n: n, tokens: tokens, steps: make([]sync.WaitGroup, tokens),
	}
	for i := range l.steps {
		l.steps[i].Add(n)
	}
	return l
}

// output is request r's expected token ids and text.
func (l *lockstep) output(r int) Chunk {
	var c Chunk
	for i := range l.tokens {
		c.TokenIDs = append(c.TokenIDs, uint32(r*1000+i))
		c.Text += fmt.Sprintf("<%d.%d é>", r, i)
	}
	return c
}

func (l *lockstep) Generate(ctx context.Context, req GenerateRequest, send func(Chunk) error) (Result, error) {
	r, err := strconv.Atoi(req.RequestID)
	if err != nil {
		return Result{}, &FieldError{Field: "request_id", Problem: "not a number"}
	}
	for i := range l.tokens {
		if i > 0 {
			l.steps[i-1].Wait()
		}
		if err := send(Chunk{TokenIDs: []uint32{uint32(r*1000 + i)}, Text: fmt.Sprintf("<%d.%d é>", r, i)}); err != nil {
			return Result{}, err
		}
		l.steps[i].Done()
	}
	return Result{FinishReason: FinishLength, CompletionTokens: uint32(l.tokens)}, nil
}

func (l *lockstep) Abort(context.Context, []string) error { return nil }

// TestMultiplexCarriesManyRequests: with an adapter of this sdk, the host
// sends all requests over one Multiplex stream, the tokens of many
// requests made in the same step travel in one message, and each request
// gets exactly its own output and result. An adapter built before
// Multiplex (no capability, the RPC unimplemented) still serves every
// request with a Generate call each.
func TestMultiplexCarriesManyRequests(t *testing.T) {
	t.Parallel()
	const n, tokens = 32, 20
	for _, old := range []bool{false, true} {
		t.Run(map[bool]string{false: "multiplex", true: "older adapter"}[old], func(t *testing.T) {
			t.Parallel()
			l := newLockstep(n, tokens)
			e, srv := countingEngine(t, l, old)
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for r := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var got []Chunk
					res, err := e.Generate(t.Context(), GenerateRequest{RequestID: strconv.Itoa(r), TokenIDs: []uint32{1}}, func(c Chunk) error {
						got = append(got, c)
						return nil
					})
					want, have := l.output(r), joined(got)
					switch {
					case err != nil || res.FinishReason != FinishLength || res.CompletionTokens != tokens:
						errs <- fmt.Errorf("request %d: Generate() = %+v, %v; want length with %d tokens", r, res, err, tokens)
					case !slices.Equal(have.TokenIDs, want.TokenIDs) || have.Text != want.Text:
						errs <- fmt.Errorf("request %d received %v %q, want %v %q", r, have.TokenIDs, have.Text, want.TokenIDs, want.Text)
					}
				}()
			}
			within(t, "the requests", wg.Wait)
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if old {
				if srv.generates != n || srv.muxes != 0 {
					t.Errorf("older adapter: %d Generate and %d Multiplex calls, want %d and 0", srv.generates, srv.muxes, n)
				}
				return
			}
			if srv.generates != 0 || srv.muxes != 1 {
				t.Errorf("%d Generate and %d Multiplex calls, want 0 and 1", srv.generates, srv.muxes)
			}
			items := 0
			for _, b := range srv.batches {
				items += b
			}
			// n*tokens chunks and n finals, unmerged, would be one message each.
			if len(srv.batches) >= n*(tokens+1) || slices.Max(srv.batches) < 2 {
				t.Errorf("%d items in %d messages (at most %d in one), want requests sharing messages", items, len(srv.batches), slices.Max(srv.batches))
			}
			t.Logf("%d requests x %d tokens: %d items in %d messages", n, tokens, items, len(srv.batches))
		})
	}
}

// TestMultiplexErrors: a request's error crosses Multiplex as its own
// Generate's status would, field included, and ends only that request.
func TestMultiplexErrors(t *testing.T) {
	t.Parallel()
	l := newLockstep(1, 3)
	e, _ := countingEngine(t, l, false)
	_, err := e.Generate(t.Context(), GenerateRequest{RequestID: "x", TokenIDs: []uint32{1}}, func(Chunk) error { return nil })
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "request_id" || !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Generate(bad request) = %v, want a FieldError naming request_id", err)
	}
	res, err := e.Generate(t.Context(), GenerateRequest{RequestID: "0", TokenIDs: []uint32{1}}, func(Chunk) error { return nil })
	if err != nil || res.CompletionTokens != 3 {
		t.Errorf("Generate() after another request's error = %+v, %v; want 3 tokens", res, err)
	}
}

// TestMultiplexSlowClient: one request whose client stops reading does not
// stall the others on the shared stream; once maxMailbox of its output
// waits it fails with errMailboxFull, and the adapter's request is
// cancelled.
func TestMultiplexSlowClient(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("日本", 5_000) // 30,000 bytes
	engineDone := make(chan error, 1)
	impl := &stubGenerator{
		stubEngine: stubEngine{info: func(context.Context) (AdapterInfo, error) {
			return AdapterInfo{Name: "slow", Capabilities: Capabilities{Generate: true}}, nil
		}},
		generate: func(ctx context.Context, req GenerateRequest, send func(Chunk) error) (Result, error) {
			if req.RequestID == "fast" {
				err := send(Chunk{TokenIDs: []uint32{1}, Text: "ok"})
				return Result{FinishReason: FinishStop, CompletionTokens: 1}, err
			}
			// Far more than maxMailbox, unless cancelled first.
			for i := range 10 * maxMailbox / len(big) {
				if err := send(Chunk{TokenIDs: []uint32{uint32(i)}, Text: big}); err != nil {
					engineDone <- err
					return Result{}, err
				}
			}
			engineDone <- nil
			return Result{FinishReason: FinishStop}, nil
		},
	}
	e, _ := countingEngine(t, impl, false)
	release := make(chan struct{})
	slowErr := make(chan error, 1)
	go func() {
		_, err := e.Generate(t.Context(), GenerateRequest{RequestID: "slow", TokenIDs: []uint32{1}}, func(Chunk) error {
			<-release
			return nil
		})
		slowErr <- err
	}()
	select {
	case err := <-engineDone:
		if err == nil {
			t.Fatal("the adapter produced all of the slow request's output: not cancelled")
		}
	case <-time.After(waitFor):
		t.Fatal("the adapter's slow request was not cancelled")
	}
	within(t, "a request beside the slow one", func() {
		res, err := e.Generate(t.Context(), GenerateRequest{RequestID: "fast", TokenIDs: []uint32{1}}, func(Chunk) error { return nil })
		if err != nil || res.CompletionTokens != 1 {
			t.Errorf("Generate() beside a stalled client = %+v, %v; want 1 token", res, err)
		}
	})
	close(release)
	if err := <-slowErr; !errors.Is(err, errMailboxFull) {
		t.Errorf("stalled client's Generate() = %v, want %v", err, errMailboxFull)
	}
}
