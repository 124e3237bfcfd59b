// Package workerapi provides the facts of the vigil.worker.v1 contract that
// both sides of a worker connection must agree on: the request size limit,
// the keepalive minimum, the liveness and registration service names, the error domain,
// reasons and metadata keys, and the gRPC options of a connection that
// carries token streams.
//
// The worker endpoint (package endpoint) serves them and vigil route
// (package router) relies on them; keeping them here lets the router know
// the worker's contract without knowing the worker.
package workerapi

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// MaxRequestBytes is the largest request message a worker receives, in
// bytes; a larger one gets RESOURCE_EXHAUSTED from gRPC before it reaches
// the engine. It is gRPC's default message limit (4 MiB), which the
// adapter's server and the engines' keep, less 64 KiB for what the worker
// and the adapter add to a request on its way (engine request ids,
// engine-specific fields): a request the worker takes fits every later hop.
// vigil route checks requests against it before sending them.
const MaxRequestBytes = 4<<20 - 64<<10

// KeepaliveMinTime is the shortest interval at which clients (vigil route)
// may ping a worker to detect a frozen one; gRPC's default (5 minutes)
// would cut them off with GOAWAY too_many_pings.
const KeepaliveMinTime = 5 * time.Second

// LivenessService is the grpc.health.v1 service name of a worker's
// liveness: SERVING while vigil's lifecycle runs, however long it waits for
// its engine, and NOT_SERVING once it is stopping for good. Probe it for
// liveness (Kubernetes `grpc: {port, service: vigil.liveness}`), and ""
// for readiness.
const LivenessService = "vigil.liveness"

// RegistrationService is the grpc.health.v1 service name of a worker's
// registration: SERVING while the registry holds the worker (registered,
// renewed within its TTL), NOT_SERVING otherwise: before it registers,
// while withdrawn, and while the registry refuses it (a token without
// permission) or cannot be reached, however well the engine serves. An
// operator's check for "serving but not in discovery".
const RegistrationService = "vigil.registration"

// ErrorDomain is the google.rpc.ErrorInfo domain of the worker's errors.
const ErrorDomain = "vigil.worker.v1"

// ReasonContextLength is the google.rpc.ErrorInfo reason of an
// INVALID_ARGUMENT for a request that does not fit the model's maximum
// length; its metadata holds MetaMaxModelLen, MetaPromptTokens and
// MetaMaxTokens as decimal numbers. Its domain is ErrorDomain.
const ReasonContextLength = "CONTEXT_LENGTH_EXCEEDED"

// The metadata keys of a ReasonContextLength ErrorInfo.
const (
	// MetaMaxModelLen is the model's maximum length in tokens.
	MetaMaxModelLen = "max_model_len"
	// MetaPromptTokens is the prompt's length in tokens.
	MetaPromptTokens = "prompt_tokens"
	// MetaMaxTokens is the request's max_tokens; 0 when it set none.
	MetaMaxTokens = "max_tokens"
)

// MetaWorkerID is the gRPC request metadata key under which vigil route
// sends the id of the worker it means to reach (discovery's WorkerID). A
// worker with another id refuses the request (CheckWorkerID): the address
// discovery gave is held by another worker now, the one registered there
// having died without withdrawing (kubernetes #109414).
const MetaWorkerID = "vigil-worker-id"

// ReasonWorkerMismatch is the google.rpc.ErrorInfo reason of an UNAVAILABLE
// from a worker whose id is not the one the request's MetaWorkerID names;
// its metadata holds MetaExpectedWorkerID and MetaAnsweringWorkerID. Its
// domain is ErrorDomain. The router tries another worker and stops
// sending to that discovery entry until discovery changes it.
const ReasonWorkerMismatch = "WORKER_MISMATCH"

// The metadata keys of a ReasonWorkerMismatch ErrorInfo.
const (
	// MetaExpectedWorkerID is the id the request named.
	MetaExpectedWorkerID = "expected_worker_id"
	// MetaAnsweringWorkerID is the id of the worker that answered.
	MetaAnsweringWorkerID = "worker_id"
)

// CheckWorkerID is a worker's check of a request's MetaWorkerID against
// its own id: nil when ctx's incoming metadata names id, or names none (a
// client, or a router of the release before, which sends none), or id is
// ""; else UNAVAILABLE with a ReasonWorkerMismatch ErrorInfo.
func CheckWorkerID(ctx context.Context, id string) error {
	want := metadata.ValueFromIncomingContext(ctx, MetaWorkerID)
	if id == "" || len(want) == 0 || want[0] == id {
		return nil
	}
	st := status.Newf(codes.Unavailable, "this worker is %q, not %q: its address is another worker's now; try another worker", id, want[0])
	st, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonWorkerMismatch, Domain: ErrorDomain,
		Metadata: map[string]string{MetaExpectedWorkerID: want[0], MetaAnsweringWorkerID: id}})
	if err != nil {
		// Only a detail that cannot be marshalled fails; the code says enough.
		return status.Errorf(codes.Unavailable, "this worker is %q, not %q", id, want[0])
	}
	return st.Err()
}

// WorkerMismatch reports whether err is a worker's ReasonWorkerMismatch
// refusal, and the id of the worker that answered.
func WorkerMismatch(err error) (answering string, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.Unavailable {
		return "", false
	}
	for _, d := range st.Details() {
		if info, isInfo := d.(*errdetails.ErrorInfo); isInfo && info.GetReason() == ReasonWorkerMismatch && info.GetDomain() == ErrorDomain {
			return info.GetMetadata()[MetaAnsweringWorkerID], true
		}
	}
	return "", false
}

// ReasonResumeElsewhere is the google.rpc.ErrorInfo reason of the
// UNAVAILABLE that ends a stream a worker could not finish (its engine
// lost, its grace period over) after output; its metadata holds
// MetaOutputTokens, and the final message before it carries
// Final.resume. Its domain is ErrorDomain. A router continues the stream
// on another worker with a GenerateRequest.resume (docs/worker-api.md,
// "Resume").
const ReasonResumeElsewhere = "RESUME_ELSEWHERE"

// MetaOutputTokens is the ReasonResumeElsewhere metadata key of the output
// token ids the worker sent, a decimal number.
const MetaOutputTokens = "output_tokens"

// ResumeElsewhereError is the status that ends a stream to be resumed
// elsewhere: UNAVAILABLE with msg and a ReasonResumeElsewhere ErrorInfo.
func ResumeElsewhereError(msg string, outputTokens uint32) error {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonResumeElsewhere, Domain: ErrorDomain,
		Metadata: map[string]string{MetaOutputTokens: strconv.FormatUint(uint64(outputTokens), 10)}}); err == nil {
		st = d
	}
	return st.Err()
}

// ResumeElsewhere reports whether err is a worker's ReasonResumeElsewhere
// end of a stream.
func ResumeElsewhere(err error) bool {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if info, isInfo := d.(*errdetails.ErrorInfo); isInfo && info.GetReason() == ReasonResumeElsewhere && info.GetDomain() == ErrorDomain {
			return true
		}
	}
	return false
}

// streamWindow is the static HTTP/2 flow-control window of a worker
// connection. A static window turns off gRPC's BDP estimator, which sends a
// PING for nearly every small message; with one message per token that
// doubles the writes and wake-ups per token. It is the window the sdk's
// plugin transport uses (host to adapter, adapter to engine), so that no
// hop of a token's way from the engine to the router's client pings.
const streamWindow = 1 << 20

// DialOptions are the options of a connection to a worker: the stream
// window, and requests refused before they are sent when over
// MaxRequestBytes.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(streamWindow),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(MaxRequestBytes)),
	}
}

// ServerOptions are the options of a server of the worker API (a worker,
// or vigil route's gRPC front): the stream window, and requests over
// MaxRequestBytes refused.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(streamWindow),
		grpc.MaxRecvMsgSize(MaxRequestBytes),
	}
}

// ContextLengthError is the INVALID_ARGUMENT for a prompt of promptLen
// tokens, with maxTokens to generate, over a model of maxLen; field is
// the field at fault (the prompt's, or stopping.max_tokens), named first
// in the message, and a ReasonContextLength ErrorInfo carries
// the numbers.
func ContextLengthError(field string, maxLen, promptLen, maxTokens uint32) error {
	var msg string
	if field == "stopping.max_tokens" {
		msg = fmt.Sprintf("%s: %d plus the prompt's %d tokens exceeds the model's maximum length %d", field, maxTokens, promptLen, maxLen)
	} else {
		msg = fmt.Sprintf("%s: %d tokens, but the model's maximum length is %d", field, promptLen, maxLen)
	}
	st, err := status.New(codes.InvalidArgument, msg).WithDetails(&errdetails.ErrorInfo{
		Reason: ReasonContextLength, Domain: ErrorDomain,
		Metadata: map[string]string{
			MetaMaxModelLen:  strconv.FormatUint(uint64(maxLen), 10),
			MetaPromptTokens: strconv.FormatUint(uint64(promptLen), 10),
			MetaMaxTokens:    strconv.FormatUint(uint64(maxTokens), 10),
		},
	})
	if err != nil {
		return status.Error(codes.InvalidArgument, msg)
	}
	return st.Err()
}
