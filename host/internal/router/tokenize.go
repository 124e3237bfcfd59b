package router

import (
	"context"
	"errors"

	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// tokenizeAsk is what a Tokenize or Detokenize for model needs of a
// worker: the tokenize capability, a chat template for messages, and
// chat_template_kwargs and tools when they are used (a replayed tool turn).
func tokenizeAsk(model string, msgs *workerv1.Messages) Ask {
	ask := Ask{Model: model, Messages: msgs != nil, Needs: []discovery.Need{{Name: discovery.CapTokenize}}, Kind: KindAny}
	if msgs.GetChatTemplateKwargs() != "" {
		ask.Needs = append(ask.Needs, discovery.Need{Name: discovery.CapChatTemplateKwargs})
	}
	if usesTools(msgs) {
		ask.Needs = append(ask.Needs, discovery.Need{Name: discovery.CapTools})
	}
	return ask
}

// noTokenizer is the answer when no worker of the model lists the
// tokenize capability: FAILED_PRECONDITION, as such a worker's own
// answer, naming the model and the flag that gives a worker a tokenizer.
func noTokenizer(model string) error {
	return status.Errorf(codes.FailedPrecondition, "model: no %s serves tokenize (none lists the capability %s); "+
		"a worker started with --tokenizer-dir DIR (the model's tokenizer.json) serves it", describe(model), discovery.CapTokenize)
}

// Tokenize relays a Tokenize to a worker of req.Model that lists the
// tokenize capability, with the retries of Generate; without one, it is
// FAILED_PRECONDITION naming the model.
func (p *Proxy) Tokenize(ctx context.Context, req *workerv1.TokenizeRequest) (*workerv1.TokenizeResponse, error) {
	var resp *workerv1.TokenizeResponse
	err := p.unary(ctx, tokenizeAsk(req.GetModel(), req.GetMessages()), req, func(ctx context.Context, c workerv1.WorkerClient) (err error) {
		resp, err = c.Tokenize(ctx, req)
		return err
	})
	_, err = cleanStatus(err)
	return resp, err
}

// Detokenize relays a Detokenize as Tokenize does.
func (p *Proxy) Detokenize(ctx context.Context, req *workerv1.DetokenizeRequest) (*workerv1.DetokenizeResponse, error) {
	var resp *workerv1.DetokenizeResponse
	err := p.unary(ctx, tokenizeAsk(req.GetModel(), nil), req, func(ctx context.Context, c workerv1.WorkerClient) (err error) {
		resp, err = c.Detokenize(ctx, req)
		return err
	})
	_, err = cleanStatus(err)
	return resp, err
}

// unary runs call, a unary RPC of req, on a worker that takes ask,
// trying another (up to ProxyConfig.Retries more) when one answers
// UNAVAILABLE or RESOURCE_EXHAUSTED, as Generate's attempts before a
// first message do. A missing tokenize capability is noTokenizer.
func (p *Proxy) unary(ctx context.Context, ask Ask, req proto.Message, call func(context.Context, workerv1.WorkerClient) error) error {
	if p.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.RequestTimeout)
		defer cancel()
	}
	if size := proto.Size(req); size > workerapi.MaxRequestBytes {
		return &TooLargeError{Size: size, Limit: workerapi.MaxRequestBytes}
	}
	tried := map[string]bool{}
	var lastErr error
	for attempt := 0; attempt <= p.cfg.Retries; attempt++ {
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		ep, cc, lease, err := p.pick(ask, tried, lastErr, nil)
		if ue, ok := errors.AsType[*UnmetError](err); ok && ue.Need.Name == discovery.CapTokenize {
			return noTokenizer(ask.Model)
		}
		if err != nil {
			return err
		}
		err = call(metadata.AppendToOutgoingContext(ctx, workerapi.MetaWorkerID, ep.WorkerID), workerv1.NewWorkerClient(cc))
		if err != nil && workerFault(ctx, err, answer{}) {
			lease.Failed()
		}
		lease.Release()
		err = lease.c.tls.explain(err)
		if answering, ok := workerapi.WorkerMismatch(err); ok {
			p.pool.Quarantine(ep, answering)
			attempt--
		}
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		lastErr = err
		p.log.Debug("worker refused a request (Tokenize, Detokenize or Embed)", "worker_id", ep.WorkerID, "addr", ep.Addr(),
			"attempt", attempt+1, "code", status.Code(err), "error", status.Convert(err).Message())
	}
	return lastErr
}
