package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// engineClient is the host's view of an adapter subprocess: an Engine whose
// calls travel over vigil.plugin.v1.
type engineClient struct {
	client pluginv1.EngineClient
	// exited reports whether the adapter process is gone; nil in tests
	// without a process.
	exited func() bool
	// multiplex: Info said the adapter serves Multiplex, so Generate uses
	// it; an adapter without it (written without the sdk, say) gets one
	// Generate call per request.
	multiplex atomic.Bool
	mux       muxClient
	// fields are the GenerateRequest fields the adapter reads, from Info;
	// nil before Info (tests) or for an adapter that does not forward
	// requests, which checks nothing.
	fields atomic.Pointer[requestFields]
	// embed: Info said the adapter serves Embed.
	embed atomic.Bool
}

var (
	_ Engine    = (*engineClient)(nil)
	_ Generator = (*engineClient)(nil)
	_ Embedder  = (*engineClient)(nil)
)

func (c *engineClient) err(err error) error { return fromStatus(err, c.exited) }

// ctxErr is err for a call whose contract returns ctx's error once ctx has
// ended: the status alone may say otherwise, as when a deadline that
// reached the adapter too ends the stream with CANCELLED first. A deadline
// counts once passed, even before ctx's timer has fired.
func (c *engineClient) ctxErr(ctx context.Context, err error) error {
	if cerr := ContextErr(ctx); cerr != nil {
		return &classError{cerr, c.err(err).Error()}
	}
	return c.err(err)
}

func (c *engineClient) Info(ctx context.Context) (AdapterInfo, error) {
	resp, err := c.client.Info(ctx, &pluginv1.InfoRequest{})
	if err != nil {
		return AdapterInfo{}, c.err(err)
	}
	caps := resp.GetCapabilities()
	if caps.GetGenerate() && len(caps.GetGenerateRequestFields()) == 0 {
		return AdapterInfo{}, fmt.Errorf("adapter %q: %w", resp.GetName(), errNoRequestFields)
	}
	c.multiplex.Store(caps.GetMultiplex())
	c.embed.Store(caps.GetEmbed())
	c.fields.Store(newRequestFields(resp.GetName(), caps.GetGenerateRequestFields()))
	return AdapterInfo{
		Name:         resp.GetName(),
		Version:      resp.GetVersion(),
		Capabilities: capabilitiesFromProto(resp.GetCapabilities()),
	}, nil
}

func (c *engineClient) Start(ctx context.Context, req StartRequest) (Worker, error) {
	resp, err := c.client.Start(ctx, startRequestToProto(req))
	if err != nil {
		if ContextErr(ctx) == nil {
			return Worker{}, c.errAfterExit(err)
		}
		return Worker{}, c.ctxErr(ctx, err)
	}
	return workerFromProto(resp.GetWorker()), nil
}

// WatchAvailability relays the adapter's stream. Whatever ends the stream
// other than a Lost event or ctx (the adapter dying, a transport error)
// becomes a final Lost event, so the host never mistakes silence for health.
func (c *engineClient) WatchAvailability(ctx context.Context) (<-chan Event, error) {
	stream, err := c.client.WatchAvailability(ctx, &pluginv1.WatchAvailabilityRequest{})
	if err != nil {
		return nil, c.err(err)
	}
	// The adapter sends headers once its own WatchAvailability has
	// succeeded. A stream that fails before them carries that call's error
	// (ErrNotStarted, say), which is returned here as the Engine contract
	// says rather than relayed as a Lost event. Header returns nil metadata
	// when the stream ended without headers; Recv then gives its status.
	if md, _ := stream.Header(); md == nil {
		if _, err := stream.Recv(); err != nil && !errors.Is(err, io.EOF) {
			return nil, c.err(err)
		}
	}
	out := make(chan Event)
	go func() {
		defer close(out)
		for {
			msg, err := stream.Recv()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				reason := ReasonStreamEnded
				if !errors.Is(err, io.EOF) {
					reason = c.streamFailure(err)
				}
				select {
				case out <- Event{Availability: Lost, Reason: reason, Time: time.Now()}:
				case <-ctx.Done():
				}
				return
			}
			ev := eventFromProto(msg)
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			if ev.Availability == Lost {
				return
			}
		}
	}()
	return out, nil
}

// exitWait bounds how long a call that failed as if the adapter had died,
// on a path where a moment does not matter (startup, the availability
// stream, shutdown), waits to see the adapter process exit, so that its
// error says the adapter died, not only that a read failed: a dying
// process's sockets close a moment before its parent can reap it. Not on
// the request path, where UNAVAILABLE is also an engine's answer.
const exitWait = 100 * time.Millisecond

// errAfterExit classifies err as c.err does; when err is a failure the
// adapter's death would cause (UNAVAILABLE), it first waits, up to
// exitWait, to see the adapter process exit.
func (c *engineClient) errAfterExit(err error) error {
	if c.exited != nil && status.Code(err) == codes.Unavailable {
		// go-plugin tells the exit by polling alone.
		for deadline := time.Now().Add(exitWait); !c.exited() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return c.err(err)
}

// streamFailure is the reason of the Lost event that ends an availability
// stream failed with err.
func (c *engineClient) streamFailure(err error) string {
	if err = c.errAfterExit(err); errors.Is(err, ErrPluginExited) {
		return err.Error()
	}
	return fmt.Sprintf("adapter availability stream failed: %v", err)
}

func (c *engineClient) Shutdown(ctx context.Context) error {
	_, err := c.client.Shutdown(ctx, &pluginv1.ShutdownRequest{})
	return c.errAfterExit(err)
}

// Generate relays the adapter's output, calling send for each chunk. A
// receiving goroutine reads the stream while send runs, and the chunks
// that arrive meanwhile go to the next send as one, merged in order: a
// slow next hop gets fewer, larger chunks, an idle one each chunk at once.
// With an adapter that serves Multiplex, all requests share one stream
// (see generateMux); otherwise each has its own Generate call.
func (c *engineClient) Generate(ctx context.Context, req GenerateRequest, send func(Chunk) error) (Result, error) {
	p := generateRequestToProto(req)
	if err := c.fields.Load().check(p); err != nil {
		return Result{}, err
	}
	if c.multiplex.Load() {
		return c.generateMux(ctx, req, p, send)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the adapter's stream, which aborts the engine request
	stream, err := c.client.Generate(ctx, p)
	if err != nil {
		return Result{}, c.ctxErr(ctx, err)
	}
	q := newChunkQueue(true)
	var (
		res     Result
		recvErr error
	)
	received := make(chan struct{})
	go func() {
		defer close(received)
		defer q.close()
		res, recvErr = c.receive(ctx, stream, req, q)
	}()
	for {
		ch, ok := q.take()
		if !ok {
			break
		}
		if cerr := ContextErr(ctx); cerr != nil {
			// Ended: what waits is dropped, so no result either.
			cancel()
			<-received
			if recvErr == nil {
				recvErr = cerr
			}
			return Result{}, recvErr
		}
		if err := send(ch); err != nil {
			q.fail(err)
			cancel()
			<-received
			return Result{}, err
		}
	}
	<-received
	return res, recvErr
}

// receive reads the adapter's stream, putting its chunks in q, until the
// final message, which it returns, or an error.
func (c *engineClient) receive(ctx context.Context, stream pluginv1.Engine_GenerateClient, req GenerateRequest, q *chunkQueue) (Result, error) {
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Result{}, fmt.Errorf("%w: adapter ended the stream without a final message", ErrUnavailable)
			}
			return Result{}, c.ctxErr(ctx, err)
		}
		if f := msg.GetFinal(); f != nil {
			// The final message is the last: anything after it, a message
			// or an error, is an adapter that broke the protocol.
			if _, err := stream.Recv(); !errors.Is(err, io.EOF) && ctx.Err() == nil {
				after := "a message"
				if err != nil {
					after = fmt.Sprintf("an error (%v)", c.err(err))
				}
				return Result{}, fmt.Errorf("adapter sent %s after the final message of request %s", after, req.RequestID)
			}
			return resultFromProto(f), nil
		}
		if err := q.put(ctx, chunkFromProto(msg)); err != nil {
			// The consumer failed (its error is Generate's) or ctx ended.
			return Result{}, c.ctxErr(ctx, err)
		}
	}
}

// Abort asks the adapter to end engine-side requests.
func (c *engineClient) Abort(ctx context.Context, requestIDs []string) error {
	_, err := c.client.Abort(ctx, &pluginv1.AbortRequest{RequestIds: requestIDs})
	return c.err(err)
}
