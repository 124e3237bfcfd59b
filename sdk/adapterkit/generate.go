package adapterkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/sdk"
)

// AbortTimeout bounds the abort Relay sends for a request whose caller went
// away: the engine answers in milliseconds, or is gone.
const AbortTimeout = 2 * time.Second

// Stream is the receiving side of an engine's server stream, as grpc-go's
// generated clients return it (grpc.ServerStreamingClient[M]).
type Stream[M any] interface {
	Recv() (*M, error)
}

// Generation is one engine request for Relay.
type Generation[M any] struct {
	// Engine names the engine in errors, e.g. "vLLM".
	Engine string
	// RequestID is the engine-side request id, for Abort and errors.
	RequestID string
	// Open sends the request and returns the engine's response stream.
	Open func(ctx context.Context) (Stream[M], error)
	// Next maps one response message: it returns the new output to send
	// (nothing is sent when it has neither token ids nor text) and records
	// usage and the finish reason in res.
	Next func(msg *M, res *sdk.Result) sdk.Chunk
	// Abort ends the engine request by id. Relay calls it when the caller
	// goes away or send fails, on a context that outlives the caller's,
	// bounded by AbortTimeout; its error is ignored, since the engine may
	// be gone. Nil: the engine has no abort call and takes its stream's
	// close (an HTTP/2 RST_STREAM) for the abort, which Relay and
	// Adapter.Shutdown then send; an engine that goes on generating
	// after its client left needs Abort.
	Abort func(ctx context.Context, id string) error
	// InFlight, when set, is the adapter's set of generations in flight
	// (Adapter.InFlight): Relay keeps this one in it while it runs, so
	// that Adapter.Shutdown aborts it if it is still in flight, and the
	// two never abort it twice. Nil: Relay alone aborts it.
	InFlight *InFlight
}

// Relay implements sdk.Generator.Generate for one engine stream: it opens
// the stream, sends each message's output in order, and returns the result
// once the stream ends. It returns an error when the stream ends without a
// finish reason. When ctx ends, or send fails, it aborts the engine request
// (Generation.Abort) and returns ctx's or send's error. Engine errors are
// classified with Classify, knowing whether output was sent. The stream's
// context ends when Relay returns, so a stream still open is reset then.
func Relay[M any](ctx context.Context, g Generation[M], send func(sdk.Chunk) error) (sdk.Result, error) {
	var res sdk.Result
	sctx, closeStream := context.WithCancel(ctx)
	defer closeStream()
	if g.Abort == nil {
		// The stream's close is the abort.
		g.Abort = func(context.Context, string) error { closeStream(); return nil }
	}
	var fl *flight
	if g.InFlight != nil {
		fl = g.InFlight.add(g.RequestID, g.Abort)
		defer g.InFlight.remove(fl)
	}
	stream, err := g.Open(sctx)
	if err != nil {
		if err := sdk.ContextErr(ctx); err != nil {
			return res, err
		}
		return res, Classify(g.Engine, err, false)
	}
	sent := false
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if res.FinishReason == sdk.FinishUnknown {
				return res, fmt.Errorf("%s ended request %s without a finish reason", g.Engine, g.RequestID)
			}
			return res, nil
		}
		if err != nil {
			if err := sdk.ContextErr(ctx); err != nil {
				abort(ctx, g, fl)
				return res, err
			}
			return res, Classify(g.Engine, err, sent)
		}
		if c := g.Next(msg, &res); !empty(c) {
			if err := send(c); err != nil {
				abort(ctx, g, fl)
				return res, err
			}
			sent = true
		}
	}
}

// empty: c carries no output, so Relay sends nothing for it. A prompt's
// logprobs alone are output.
func empty(c sdk.Chunk) bool {
	return len(c.TokenIDs) == 0 && c.Text == "" && len(c.Logprobs) == 0 && c.PromptLogprobs == nil
}

// abort ends the engine request of a caller that went away. Cancelling the
// stream alone may leave the engine generating until its next output.
func abort[M any](ctx context.Context, g Generation[M], fl *flight) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AbortTimeout)
	defer cancel()
	if fl != nil {
		fl.stop(actx) // or waits for Shutdown's abort of it
		return
	}
	_ = g.Abort(actx, g.RequestID)
}

// Classify maps an error from an engine's request RPC to the sdk's classes,
// so the host answers the client right. Before any output (started false):
// INVALID_ARGUMENT wraps sdk.ErrInvalidArgument, UNAVAILABLE and
// RESOURCE_EXHAUSTED wrap sdk.ErrUnavailable (the client retries
// elsewhere). After output, UNAVAILABLE (the engine or its connection
// lost) wraps sdk.ErrUnavailable, so the host can have the stream
// continued on another worker; any other error there wraps no class.
// The engine's status stays out of the chain; its code and message are in
// the text.
func Classify(engine string, err error, started bool) error {
	st, _ := status.FromError(err)
	switch {
	case started && st.Code() == codes.Unavailable:
		return fmt.Errorf("%s request failed mid-stream: %w: %s", engine, sdk.ErrUnavailable, st.Message())
	case started:
		return fmt.Errorf("%s request failed mid-stream: %s: %s", engine, st.Code(), st.Message())
	case st.Code() == codes.InvalidArgument:
		return fmt.Errorf("%w: %s rejected the request: %s", sdk.ErrInvalidArgument, engine, st.Message())
	case st.Code() == codes.Unavailable, st.Code() == codes.ResourceExhausted:
		return fmt.Errorf("%w: %s: %s", sdk.ErrUnavailable, engine, st.Message())
	}
	return fmt.Errorf("%s request failed: %s: %s", engine, st.Code(), st.Message())
}
