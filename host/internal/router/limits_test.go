package router

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A prompt whose request is over the workers' limit gets 413 naming the
// limit from the router itself: no worker is sent any of it, even with
// --max-body-bytes above the limit.
func TestOversizedPromptRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "m"), startWorker(t, "b", "m")
	r := startRouter(t, []*fakeWorker{a, b}, withMaxBody(8<<20))

	prompt := strings.Repeat("x", 4_300_000)
	code, hdr, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"`+prompt+`"}`)
	e, _ := decode(t, body)["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if code != http.StatusRequestEntityTooLarge || hdr.Get("Retry-After") != "" ||
		e["type"] != "invalid_request_error" || e["param"] != "prompt" || !strings.Contains(msg, fmt.Sprint(workerapi.MaxRequestBytes)) {
		t.Errorf("got %d %v, want 413 invalid_request_error for prompt naming the limit %d", code, e, workerapi.MaxRequestBytes)
	}
	// Through the gRPC API: the router's own receive limit is the workers'.
	g := r.generate(t.Context(), "m", prompt)
	if status.Code(g.err) != codes.ResourceExhausted || !strings.Contains(g.err.Error(), fmt.Sprint(workerapi.MaxRequestBytes)) {
		t.Errorf("gRPC: got %v, want ResourceExhausted naming %d", g.err, workerapi.MaxRequestBytes)
	}
	if n := a.streams.Load() + b.streams.Load(); n != 0 {
		t.Errorf("workers got %d calls (%s), want none", n, counts(a, b))
	}
}

// A worker's receive limit below the router's (a worker of another
// version) is the client's problem, not an overload: 413 at once, and no
// other worker is tried, where --max-inflight's RESOURCE_EXHAUSTED is.
func TestWorkerMessageLimitIsNotRetried(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m", grpc.MaxRecvMsgSize(1024))
	b := startWorker(t, "b", "m", grpc.MaxRecvMsgSize(1024))
	r := startRouter(t, []*fakeWorker{a, b})

	code, _, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"`+strings.Repeat("x", 2000)+`"}`)
	e, _ := decode(t, body)["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if code != http.StatusRequestEntityTooLarge || e["param"] != "prompt" || !strings.Contains(msg, "limit of 1024 bytes") {
		t.Errorf("got %d %v, want 413 for prompt naming the worker's limit of 1024 bytes", code, e)
	}
	if n := a.streams.Load() + b.streams.Load(); n != 1 {
		t.Errorf("workers got %d calls (%s), want 1: no retry", n, counts(a, b))
	}
	if n := a.requests.Load() + b.requests.Load(); n != 0 {
		t.Errorf("workers' handlers saw %d requests, want 0", n)
	}
}

// messageTooLarge tells gRPC's message limits, as grpc-go words them on
// the wire, from an overload; the real errors pin the wording.
func TestMessageTooLarge(t *testing.T) {
	t.Parallel()
	w := startWorker(t, "w", "m", grpc.MaxRecvMsgSize(100))
	call := func(opts ...grpc.CallOption) error {
		cc, err := grpc.NewClient("passthrough:///"+net.JoinHostPort(w.ep.Address, fmt.Sprint(w.ep.Port)),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		stream, err := workerv1.NewWorkerClient(cc).Generate(t.Context(), &workerv1.GenerateRequest{
			Prompt: &workerv1.GenerateRequest_Text{Text: strings.Repeat("x", 200)}}, opts...)
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"worker's receive limit", call(), true},
		{"client's send limit", call(grpc.MaxCallSendMsgSize(50)), true},
		{"--max-inflight", status.Error(codes.ResourceExhausted, "worker has 1 requests in flight, the most it admits (--max-inflight)"), false},
		{"unavailable", status.Error(codes.Unavailable, "message larger than max"), false},
		{"nil", nil, false},
	} {
		if got := messageTooLarge(tc.err); got != tc.want {
			t.Errorf("%s: messageTooLarge(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// The router's gRPC API takes a request of exactly the workers' limit and
// a worker serves it; one byte more is refused by the router.
func TestRouterTakesWhatWorkersTake(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})
	sized := func(n int) *workerv1.GenerateRequest {
		req := &workerv1.GenerateRequest{Model: "m", RequestId: "big"}
		for text := n; ; {
			req.Prompt = &workerv1.GenerateRequest_Text{Text: strings.Repeat("x", text)}
			if size := proto.Size(req); size != n {
				text += n - size
				continue
			}
			return req
		}
	}
	call := func(req *workerv1.GenerateRequest) error {
		stream, err := r.client.Generate(t.Context(), req)
		if err != nil {
			return err
		}
		for {
			if _, err := stream.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	if err := call(sized(workerapi.MaxRequestBytes)); err != nil {
		t.Errorf("request of the workers' limit: %v, want it served", err)
	}
	if err := call(sized(workerapi.MaxRequestBytes + 1)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("request one byte over: %v, want ResourceExhausted", err)
	}
	if n := a.requests.Load(); n != 1 {
		t.Errorf("worker served %d requests, want 1", n)
	}
}
