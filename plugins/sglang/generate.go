package sglang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Generate maps req onto SglangService/Generate (token ids in, token ids
// out: SGLang takes no text) and relays the output. Usage and the finish
// reason come from meta_info on the message with finished true. On an
// older server it fails with sdk.ErrUnavailable: requests need the current
// API.
func (a *Adapter) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	client, err := a.client()
	if err != nil {
		return sdk.Result{}, err
	}
	wire, err := toSGLang(req)
	if err != nil {
		return sdk.Result{}, err
	}
	return adapterkit.Relay(ctx, adapterkit.Generation[sglangpb.GenerateResponse]{
		Engine:    engine,
		RequestID: req.RequestID,
		Open: func(ctx context.Context) (adapterkit.Stream[sglangpb.GenerateResponse], error) {
			return client.Generate(ctx, wire)
		},
		Next:     next,
		Abort:    func(ctx context.Context, id string) error { return a.Abort(ctx, []string{id}) },
		InFlight: a.InFlight(),
	}, send)
}

// Abort calls SglangService/Abort for each id. An older server has taken
// no request through vigil, so every id is unknown to it: there is nothing
// to abort, and unknown ids are ignored.
func (a *Adapter) Abort(ctx context.Context, requestIDs []string) error {
	client, err := a.client()
	if errors.Is(err, errOlderAPI) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, id := range requestIDs {
		if _, err := client.Abort(ctx, &sglangpb.AbortRequest{Rid: id}); err != nil {
			return adapterkit.Classify(engine, err, false)
		}
	}
	return nil
}

// errOlderAPI is client's error on an older server.
var errOlderAPI = fmt.Errorf("%w: the SGLang engine serves the older %s API, which takes no requests through vigil; requests need sglang.runtime.v1", sdk.ErrUnavailable, SchedulerService)

// client is the SglangService client after Start, on the current API.
func (a *Adapter) client() (sglangpb.SglangServiceClient, error) {
	conn, err := a.Conn()
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	api := a.api
	a.mu.Unlock()
	if api == apiScheduler {
		return nil, errOlderAPI
	}
	return sglangpb.NewSglangServiceClient(conn), nil
}

func toSGLang(r sdk.GenerateRequest) (*sglangpb.GenerateRequest, error) {
	if r.TokenIDs == nil {
		return nil, fmt.Errorf("%w: prompt: SGLang takes token ids only, not text", sdk.ErrInvalidArgument)
	}
	if r.Seed != nil {
		// Not a silent drop: a client asking for reproducible sampling
		// must learn it does not get it.
		return nil, fmt.Errorf("%w: seed: SGLang's generate API (sglang.runtime.v1 SamplingParams) takes no sampling seed", sdk.ErrInvalidArgument)
	}
	ids, err := int32s("prompt", r.TokenIDs)
	if err != nil {
		return nil, err
	}
	stops, err := int32s("stop_token_ids", r.StopTokenIDs)
	if err != nil {
		return nil, err
	}
	p := &sglangpb.SamplingParams{Temperature: r.Temperature, TopP: r.TopP, Stop: r.Stop, StopTokenIds: stops}
	if r.TopK != nil {
		k, err := int32s("top_k", []uint32{*r.TopK})
		if err != nil {
			return nil, err
		}
		p.TopK = &k[0]
	}
	if r.MaxTokens > 0 {
		m, err := int32s("max_tokens", []uint32{r.MaxTokens})
		if err != nil {
			return nil, err
		}
		p.MaxNewTokens = &m[0]
	}
	if r.IgnoreEOS {
		p.IgnoreEos = &r.IgnoreEOS
	}
	if r.MinTokens > 0 {
		m, err := int32s("min_tokens", []uint32{r.MinTokens})
		if err != nil {
			return nil, err
		}
		p.MinNewTokens = &m[0]
	}
	if r.MinP != 0 {
		p.MinP = &r.MinP
	}
	stream := true
	return &sglangpb.GenerateRequest{InputIds: ids, SamplingParams: p, Stream: &stream, Rid: &r.RequestID}, nil
}

// int32s converts token ids and counts to SGLang's int32, naming the field
// of a value that does not fit.
func int32s(field string, v []uint32) ([]int32, error) {
	if v == nil {
		return nil, nil
	}
	out := make([]int32, len(v))
	for i, x := range v {
		if x > math.MaxInt32 {
			return nil, fmt.Errorf("%w: %s: %d is above SGLang's limit %d", sdk.ErrInvalidArgument, field, x, math.MaxInt32)
		}
		out[i] = int32(x)
	}
	return out, nil
}

// next maps one GenerateResponse: its new token ids, and on the last
// message the usage and finish reason from meta_info.
func next(msg *sglangpb.GenerateResponse, res *sdk.Result) sdk.Chunk {
	ids := make([]uint32, len(msg.GetOutputIds()))
	for i, id := range msg.GetOutputIds() {
		ids[i] = uint32(id)
	}
	if msg.GetFinished() {
		meta := msg.GetMetaInfo()
		res.PromptTokens = count(meta["prompt_tokens"])
		res.CompletionTokens = count(meta["completion_tokens"])
		res.FinishReason = finishReason(meta["finish_reason"])
	}
	return sdk.Chunk{TokenIDs: ids}
}

// count reads a decimal count; anything else is 0, unknown.
func count(s string) uint32 {
	n, _ := strconv.ParseUint(s, 10, 32)
	return uint32(n)
}

// finishReason reads meta_info's finish_reason, a JSON object whose type is
// "stop", "length" or "abort". A finished message without one is an
// engine error.
func finishReason(s string) sdk.FinishReason {
	var fr struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(s), &fr) != nil {
		return sdk.FinishError
	}
	switch fr.Type {
	case "stop":
		return sdk.FinishStop
	case "length":
		return sdk.FinishLength
	case "abort":
		return sdk.FinishCancelled
	}
	return sdk.FinishError
}
