package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Defaults of ProxyConfig.
const (
	// DefaultRetries is how many other workers a request may try after the
	// first refused it: enough to get past a draining worker and a full one.
	DefaultRetries = 2
	// DefaultRequestTimeout bounds a whole request, generation included:
	// long enough for a long completion, short enough that a stuck worker
	// does not hold a client forever.
	DefaultRequestTimeout = 10 * time.Minute
)

// ProxyConfig configures a Proxy.
type ProxyConfig struct {
	// Retries is how many more workers a request tries after one answers
	// UNAVAILABLE or RESOURCE_EXHAUSTED (but for a message over its size
	// limit) before its first message; 0 tries only one. Negative means 0.
	Retries int
	// RequestTimeout bounds a whole request, retries and generation
	// included; it becomes the deadline of the worker call. 0 means no
	// bound other than the client's.
	RequestTimeout time.Duration
	// Logger receives one debug line per attempt and retry; nil discards.
	Logger hclog.Logger
	// Observer, when set, is told of every request's end, first token and
	// retry, and of migrations when it is a MigrationObserver; nil: none.
	Observer Observer
	// MaxMigrations is how many times one stream moves to another worker
	// when its worker cannot finish it (its engine lost, its grace period
	// over); 0 or less: never, the client gets the failure.
	MaxMigrations int
}

// Proxy sends Generate requests to the workers of a Pool. It implements
// workerv1.WorkerServer, and NewHTTPHandler serves it as OpenAI
// completions.
type Proxy struct {
	workerv1.UnimplementedWorkerServer

	pool *Pool
	cfg  ProxyConfig
	log  hclog.Logger
	// stopping is set at a stop signal: GET /health says 503 from then on.
	stopping atomic.Bool
}

// NewProxy returns a Proxy over pool.
func NewProxy(pool *Pool, cfg ProxyConfig) *Proxy {
	cfg.Retries = max(cfg.Retries, 0)
	if cfg.Observer != nil {
		cfg.Observer.Workers(pool.Workers)
		cfg.Observer.Models(pool.KnownModels)
	}
	return &Proxy{pool: pool, cfg: cfg, log: orNull(cfg.Logger)}
}

// Generate relays the stream of a worker serving req.Model; see the package
// documentation for retries and errors. A status or final description
// holding gRPC's transport text reaches the client cleaned of it (logged
// with the original).
func (p *Proxy) Generate(req *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse]) error {
	err := p.generate(stream.Context(), req, nil, func(_ discovery.Registration, m *workerv1.GenerateResponse) error {
		if f := m.GetFinal(); f != nil && clean(f.GetDescription()) != f.GetDescription() {
			m = proto.Clone(m).(*workerv1.GenerateResponse)
			m.GetFinal().Description = clean(f.GetDescription())
		}
		return stream.Send(m)
	})
	cause, out := cleanStatus(err)
	if cause != "" {
		p.log.Warn("request failed", "request_id", req.GetRequestId(), "code", status.Code(out), "error", status.Convert(out).Message(), "cause", cause)
	}
	return out
}

// retryable reports whether a worker's status before its first message
// means nothing was generated and another worker may serve the request: it
// is unavailable, or full (--max-inflight). A message over a size limit is
// RESOURCE_EXHAUSTED too, but every worker would refuse it.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable:
		return true
	case codes.ResourceExhausted:
		return !messageTooLarge(err)
	}
	return false
}

// messageTooLarge reports whether err is gRPC's refusal of a message over a
// size limit: RESOURCE_EXHAUSTED whose message says "larger than max", as
// grpc-go's send limit ("trying to send message larger than max (N vs.
// M)") and receive limit ("grpc: received message larger than max (N vs.
// M)", and the forms after decompression) do. A worker's --max-inflight
// refusal says "requests in flight".
func messageTooLarge(err error) bool {
	st := status.Convert(err)
	return st.Code() == codes.ResourceExhausted && strings.Contains(strings.ToLower(st.Message()), "larger than max")
}

// TooLargeError is a request whose encoded size is over the workers'
// message limit, found by the router before sending it or by gRPC's limits
// (the router's send limit, a worker's receive limit). The client must
// shorten it, so no other worker is tried. gRPC clients get
// RESOURCE_EXHAUSTED, gRPC's code for a message over a limit; HTTP clients
// get 413.
type TooLargeError struct {
	// Size is the request's encoded size and Limit the limit it is over,
	// in bytes; 0 when gRPC's message did not say.
	Size, Limit int
	// Detail is gRPC's message when the limit was a worker's.
	Detail string
}

func (e *TooLargeError) Error() string {
	if e.Limit == 0 {
		return "request too large: over a worker's message limit: " + e.Detail
	}
	return fmt.Sprintf("request too large: it encodes to %d bytes, over the workers' limit of %d bytes (their gRPC message limit); shorten the prompt", e.Size, e.Limit)
}

// GRPCStatus is the status gRPC clients of the router get.
func (e *TooLargeError) GRPCStatus() *status.Status {
	return status.New(codes.ResourceExhausted, e.Error())
}

// tooLarge is a messageTooLarge error as a TooLargeError, with the sizes
// gRPC's message gives as "(N vs. M)".
func tooLarge(err error) *TooLargeError {
	msg := status.Convert(err).Message()
	e := &TooLargeError{Detail: msg}
	if i := strings.LastIndex(msg, "("); i >= 0 {
		if _, err := fmt.Sscanf(msg[i:], "(%d vs. %d)", &e.Size, &e.Limit); err != nil {
			e.Size, e.Limit = 0, 0
		}
	}
	return e
}

// errSend marks an error of the caller's send function, so that it is
// returned as it is.
type errSend struct{ err error }

func (e errSend) Error() string { return e.err.Error() }
func (e errSend) Unwrap() error { return e.err }

// generate runs req on a worker that takes it (its prompt, needsOf(req)
// and extra) and calls send for each message of the worker's stream, ep
// being that worker. It returns nil when the stream ended OK, the worker's
// status when it failed, the pool's status when no worker could be tried,
// or the error of send (after cancelling the worker call).
func (p *Proxy) generate(ctx context.Context, req *workerv1.GenerateRequest, extra []discovery.Need, send func(ep discovery.Registration, m *workerv1.GenerateResponse) error) error {
	ask := askOf(req, extra)
	o := p.cfg.Observer
	if o == nil {
		return p.try(ctx, req, ask, extra, send, nil)
	}
	var r observed
	start := time.Now()
	err := p.try(ctx, req, ask, extra, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
		if !r.first && m.GetChunk() != nil {
			r.first = true
			o.FirstToken(ep.Model, time.Since(start))
		}
		err := send(ep, m)
		r.sendFailed = err != nil
		return err
	}, &r)
	model := r.worker.Model
	if r.worker.WorkerID == "" && req.GetModel() != "" && p.pool.Known(req.GetModel()) {
		model = req.GetModel()
	}
	code := status.Code(err)
	if r.sendFailed {
		// The client went away, or its stream broke.
		code = codes.Canceled
	}
	o.Request(model, r.worker.WorkerID, code)
	if r.refused != "" {
		o.Refused(r.refused)
	}
	return err
}

// observed is what an Observer is told of a request.
type observed struct {
	worker     discovery.Registration // the last worker tried; zero: none
	first      bool                   // a chunk was sent
	sendFailed bool                   // sending to the client failed
	refused    string                 // why no worker was tried, as RefusalReasons; "": one was
	moved      bool                   // the stream moves on: the next worker is no retry
}

// move tells r, when not nil, that the stream moves to another worker.
func (r *observed) move() {
	if r != nil {
		r.moved = true
	}
}

// migrationObserver is the Observer's Migration, nil without one.
func (p *Proxy) migrationObserver() func(model, result string) {
	if o, ok := p.cfg.Observer.(MigrationObserver); ok {
		return o.Migration
	}
	return nil
}

// try is generate without the Observer; r, when not nil, learns the
// workers tried. A stream its worker cannot finish goes on elsewhere
// (migration), each move with retries of its own.
func (p *Proxy) try(ctx context.Context, req *workerv1.GenerateRequest, ask Ask, extra []discovery.Need, send func(ep discovery.Registration, m *workerv1.GenerateResponse) error, r *observed) error {
	if p.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.RequestTimeout)
		defer cancel()
	}
	// Every worker would refuse a request over its limit: refuse it here,
	// before uploading it even once.
	if size := proto.Size(req); size > workerapi.MaxRequestBytes {
		r.refuse(RefusedTooLarge)
		return &TooLargeError{Size: size, Limit: workerapi.MaxRequestBytes}
	}
	mig := newMigration(req, p.cfg.MaxMigrations, p.migrationObserver())
	tried := map[string]bool{}
	var lastErr error
	for attempt := 0; attempt <= p.cfg.Retries; attempt++ {
		if err := ctx.Err(); err != nil {
			return mig.end(send, status.FromContextError(err).Err())
		}
		ep, cc, lease, err := p.pick(ask, tried, lastErr, r)
		if err != nil {
			return mig.end(send, err)
		}
		started, err := p.attempt(ctx, cc, ep, mig.request(req, ep), mig.relay(send), lease)
		lease.Release()
		if !started {
			err = lease.c.tls.explain(err)
		}
		var se errSend
		if errors.As(err, &se) {
			return se.err
		}
		if answering, ok := workerapi.WorkerMismatch(err); ok && !started {
			// Not a worker of the request: no retry used up.
			p.pool.Quarantine(ep, answering)
			attempt--
		}
		if !started && messageTooLarge(err) {
			return mig.end(send, tooLarge(err))
		}
		if started && err != nil && ctx.Err() == nil {
			if next, nextAsk, ok := mig.next(req, ask, extra, err); ok {
				p.log.Info("worker could not finish the stream: continuing it on another worker", "request_id", req.GetRequestId(),
					"worker_id", ep.WorkerID, "output_tokens", len(next.GetResume().GetOutputTokenIds()), "error", status.Convert(err).Message())
				req, ask, lastErr, attempt = next, nextAsk, err, -1
				r.move()
				continue
			}
		}
		if err == nil || started || !retryable(err) || ctx.Err() != nil {
			return mig.end(send, err)
		}
		lastErr = err
		p.log.Debug("worker refused the request before its first message", "request_id", req.GetRequestId(),
			"worker_id", ep.WorkerID, "addr", ep.Addr(), "attempt", attempt+1, "attempts", p.cfg.Retries+1,
			"code", status.Code(err), "error", status.Convert(err).Message())
	}
	return mig.end(send, lastErr)
}

// pick is try's choice of a worker for its next attempt, added to tried
// and told to r (when not nil); the error, when there is none, is what
// try returns: lastErr, the last worker's answer, when a worker was tried.
func (p *Proxy) pick(ask Ask, tried map[string]bool, lastErr error, r *observed) (discovery.Registration, *grpc.ClientConn, *Lease, error) {
	ep, cc, lease, err := p.pool.PickLease(ask, tried)
	if err != nil {
		if lastErr != nil {
			// Every worker serving the model was tried (or discovery
			// dropped the rest): the last worker's answer says more
			// than the pool's.
			return ep, nil, nil, lastErr
		}
		r.refuse(refusal(err))
		return ep, nil, nil, err
	}
	tried[ep.Addr()] = true
	if r != nil {
		if r.worker.WorkerID != "" && !r.moved {
			p.cfg.Observer.Retry(ep.Model)
		}
		r.worker, r.moved = ep, false
	}
	return ep, cc, lease, nil
}

// askOf is what req needs of a worker, extra needs after its own.
func askOf(req *workerv1.GenerateRequest, extra []discovery.Need) Ask {
	_, text := req.GetPrompt().(*workerv1.GenerateRequest_Text)
	_, messages := req.GetPrompt().(*workerv1.GenerateRequest_Messages)
	return Ask{Model: req.GetModel(), Text: text, Messages: messages, Needs: append(needsOf(req), extra...)}
}

// attempt runs req on one worker; started reports whether any message
// reached the client (from then on there is no retry; send's errHeld
// says a message did not). It tells lease of the first
// message, and of a failure that is the worker's fault (workerFault).
func (p *Proxy) attempt(ctx context.Context, cc grpc.ClientConnInterface, ep discovery.Registration, req *workerv1.GenerateRequest,
	send func(discovery.Registration, *workerv1.GenerateResponse) error, lease *Lease) (started bool, err error) {
	var got answer
	defer func(parent context.Context) {
		if workerFault(parent, err, got) {
			lease.Failed()
		}
	}(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A worker with another id now at ep's address refuses it.
	ctx = metadata.AppendToOutgoingContext(ctx, workerapi.MetaWorkerID, ep.WorkerID)
	p.log.Debug("sending request", "request_id", req.GetRequestId(), "worker_id", ep.WorkerID, "addr", ep.Addr(), "model", req.GetModel())
	stream, err := workerv1.NewWorkerClient(cc).Generate(ctx, req)
	if err != nil {
		return false, err
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return started, nil
		}
		if err != nil {
			return started, err
		}
		got.saw(m)
		err = send(ep, m)
		if errors.Is(err, errHeld) {
			continue // not the client's (yet): no start
		}
		if !started {
			lease.FirstMessage()
		}
		started = true
		if err != nil {
			return true, errSend{err}
		}
	}
}

// answer is what an attempt got of the worker, for workerFault.
type answer struct {
	tokens   bool // a chunk with text or token ids, or a final counting any
	errFinal bool // a final with finish reason ERROR
}

func (a *answer) saw(m *workerv1.GenerateResponse) {
	if c := m.GetChunk(); c != nil && (c.GetText() != "" || len(c.GetTokenIds()) > 0) {
		a.tokens = true
	}
	if f := m.GetFinal(); f != nil {
		a.tokens = a.tokens || f.GetUsage().GetCompletionTokens() > 0
		a.errFinal = f.GetFinishReason() == workerv1.FinishReason_FINISH_REASON_ERROR
	}
}

// workerFault reports whether an attempt that ended with err, having got
// the answer got, failed by the worker's fault, which PeakEWMA counts
// against it (Lease.Failed): an error status or final, or an answer
// without a token. Neither the client's doing (it went away, its deadline
// or the request timeout passed) nor a status that blames the request
// (INVALID_ARGUMENT, too large, ...) is the worker's.
func workerFault(ctx context.Context, err error, got answer) bool {
	var se errSend
	if _, mismatch := workerapi.WorkerMismatch(err); ctx.Err() != nil || errors.As(err, &se) || mismatch {
		// A mismatch is the entry's (quarantined), not the worker's that answered.
		return false
	}
	if err == nil {
		return got.errFinal || !got.tokens
	}
	switch status.Code(err) {
	case codes.Canceled, codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition, codes.AlreadyExists:
		return false
	case codes.ResourceExhausted:
		return !messageTooLarge(err)
	}
	return true
}

// GRPCServer serves a Proxy as vigil.worker.v1.Worker, beside the standard
// grpc.health.v1 service: service names "" and vigil.worker.v1.Worker are
// SERVING while the router can route (Pool.Serving: at least one worker),
// as HTTP GET /health is 200, and NOT_SERVING otherwise and from Shutdown
// on.
type GRPCServer struct {
	grpc   *grpc.Server
	health *health.Server
}

// clientKeepalive is what the router permits its clients: pings as often
// as every workerapi.KeepaliveMinTime (5 s), as a worker permits the
// router, with or without streams open. gRPC's default (5 minutes) ends
// the connection of a client that pings every 10-60 s (grpc-go, Java,
// Envoy as deployed) with GOAWAY too_many_pings during a long prefill,
// when no data flows, failing its streams.
var clientKeepalive = keepalive.EnforcementPolicy{MinTime: workerapi.KeepaliveMinTime, PermitWithoutStream: true}

// serverKeepalive pings a client connection silent for Time and closes it
// when no answer comes within Timeout: a client that vanished (its host
// gone, a NAT or balancer that dropped the flow) stops holding its
// requests, and the pings keep an idle connection alive through
// middleboxes with idle timeouts (AWS NLB: 350 s). Idle connections are
// never closed (MaxConnectionIdle infinite): clients close theirs, and
// gRPC's GOAWAY would make a close graceful anyway.
var serverKeepalive = keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}

// NewGRPCServer returns a GRPCServer for p.
func NewGRPCServer(p *Proxy, opts ...grpc.ServerOption) *GRPCServer {
	base := append(workerapi.ServerOptions(), grpc.WaitForHandlers(true),
		grpc.KeepaliveEnforcementPolicy(clientKeepalive), grpc.KeepaliveParams(serverKeepalive))
	s := &GRPCServer{
		grpc:   grpc.NewServer(append(base, opts...)...),
		health: health.NewServer(),
	}
	workerv1.RegisterWorkerServer(s.grpc, p)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	// grpcurl and other tools list and call the services without the protos.
	reflection.Register(s.grpc)
	// After Shutdown the health server ignores these: NOT_SERVING stays.
	p.pool.WatchServing(func(serving bool) {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if serving {
			st = healthpb.HealthCheckResponse_SERVING
		}
		s.health.SetServingStatus("", st)
		s.health.SetServingStatus(workerv1.Worker_ServiceDesc.ServiceName, st)
	})
	return s
}

// NotServing reports NOT_SERVING from now on, whatever the pool: the
// router is stopping.
func (s *GRPCServer) NotServing() { s.health.Shutdown() }

// Serve serves on lis until Shutdown; it returns nil after Shutdown.
func (s *GRPCServer) Serve(lis net.Listener) error {
	if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Shutdown reports NOT_SERVING, stops accepting, and waits for the streams
// in flight to end; when ctx ends first it cancels them. It returns when
// every handler has returned.
func (s *GRPCServer) Shutdown(ctx context.Context) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
}
