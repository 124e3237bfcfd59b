package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
)

// engineServer serves an Engine over vigil.plugin.v1 inside the adapter
// process.
type engineServer struct {
	pluginv1.UnimplementedEngineServer
	impl Engine
	// noMultiplex hides Multiplex from Info, as an adapter built with an
	// sdk before it would (tests).
	noMultiplex bool
	// requestFields, when set, replaces the GenerateRequest fields Info
	// reports, as an older sdk's would (tests).
	requestFields []uint32
}

var _ pluginv1.EngineServer = (*engineServer)(nil)

func (s *engineServer) Info(ctx context.Context, _ *pluginv1.InfoRequest) (*pluginv1.InfoResponse, error) {
	info, err := s.impl.Info(ctx)
	if err == nil {
		err = CheckCapabilities(s.impl, info.Capabilities)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	caps := capabilitiesToProto(info.Capabilities)
	// Every adapter that forwards requests serves Multiplex: the sdk
	// implements it on top of the adapter's Generate.
	caps.Multiplex = info.Capabilities.Generate && !s.noMultiplex
	caps.GenerateRequestFields = generateRequestFields()
	if s.requestFields != nil {
		caps.GenerateRequestFields = s.requestFields
	}
	return &pluginv1.InfoResponse{
		Name:         info.Name,
		Version:      info.Version,
		Capabilities: caps,
	}, nil
}

func (s *engineServer) Start(ctx context.Context, req *pluginv1.StartRequest) (*pluginv1.StartResponse, error) {
	w, err := s.impl.Start(ctx, startRequestFromProto(req))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginv1.StartResponse{Worker: workerToProto(w)}, nil
}

func (s *engineServer) WatchAvailability(_ *pluginv1.WatchAvailabilityRequest, stream pluginv1.Engine_WatchAvailabilityServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	events, err := s.impl.WatchAvailability(ctx)
	if err != nil {
		return toStatus(err)
	}
	// Headers tell the client that the watch began; an error before them is
	// the answer to WatchAvailability itself (see engineClient).
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	for ev := range events {
		if err := stream.Send(eventToProto(ev)); err != nil {
			return err
		}
		if ev.Availability == Lost {
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	// The adapter closed the channel without saying Lost: per the Engine
	// contract that is a loss, so say it explicitly.
	return stream.Send(eventToProto(Event{Availability: Lost, Reason: ReasonStreamEnded, Time: time.Now()}))
}

func (s *engineServer) Shutdown(ctx context.Context, _ *pluginv1.ShutdownRequest) (*pluginv1.ShutdownResponse, error) {
	if err := s.impl.Shutdown(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &pluginv1.ShutdownResponse{}, nil
}

func (s *engineServer) Generate(req *pluginv1.GenerateRequest, stream pluginv1.Engine_GenerateServer) error {
	g, ok := s.impl.(Generator)
	if !ok {
		return toStatus(fmt.Errorf("%w: the adapter does not forward requests", ErrUnimplemented))
	}
	// The adapter's sends queue the chunks for a sender goroutine, which
	// merges those that wait while it is busy sending: with a next hop
	// slower than the engine, fewer, larger messages, and with an idle
	// one, each chunk at once. A send after Generate returned is refused,
	// since gRPC forbids a send after the handler's return.
	ctx := stream.Context()
	q := newChunkQueue(false)
	sent := make(chan error, 1)
	go func() { sent <- sendChunks(q, stream) }()
	res, err := g.Generate(ctx, generateRequestFromProto(req), func(c Chunk) error {
		return q.put(ctx, c)
	})
	q.close()
	// The chunks go before the final message or the error.
	sendErr := <-sent
	if err != nil {
		return toStatus(err)
	}
	if sendErr != nil {
		return sendErr
	}
	return stream.Send(&pluginv1.GenerateResponse{Kind: &pluginv1.GenerateResponse_Final{Final: resultToProto(res)}})
}

// sendChunks sends q's chunks on stream until q closes or a send fails,
// which it returns and makes q's puts return.
func sendChunks(q *chunkQueue, stream pluginv1.Engine_GenerateServer) error {
	// One message, refilled for each send: Send marshals it before it
	// returns (go-plugin's server has no stats handler that keeps it).
	chunk := &pluginv1.Chunk{}
	msg := &pluginv1.GenerateResponse{Kind: &pluginv1.GenerateResponse_Chunk{Chunk: chunk}}
	for {
		c, ok := q.take()
		if !ok {
			return nil
		}
		var err error
		if c.PromptLogprobs != nil {
			err = stream.Send(&pluginv1.GenerateResponse{Kind: &pluginv1.GenerateResponse_Prompt{
				Prompt: &pluginv1.PromptInfo{Logprobs: tokenLogprobsToProto(c.PromptLogprobs)}}})
		}
		if err == nil && (len(c.TokenIDs) > 0 || c.Text != "" || len(c.Logprobs) > 0) {
			chunk.TokenIds, chunk.Text, chunk.Logprobs = c.TokenIDs, c.Text, tokenLogprobsToProto(c.Logprobs)
			err = stream.Send(msg)
		}
		if err != nil {
			q.fail(err)
			return err
		}
	}
}

// errSendAfterReturn answers a send called after Generate returned.
var errSendAfterReturn = errors.New("send called after Generate returned")

func (s *engineServer) Abort(ctx context.Context, req *pluginv1.AbortRequest) (*pluginv1.AbortResponse, error) {
	g, ok := s.impl.(Generator)
	if !ok {
		return nil, toStatus(fmt.Errorf("%w: the adapter does not forward requests", ErrUnimplemented))
	}
	if err := g.Abort(ctx, req.GetRequestIds()); err != nil {
		return nil, toStatus(err)
	}
	return &pluginv1.AbortResponse{}, nil
}
