package endpoint

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// failing sends one chunk, then fails with err.
type failing struct{ err error }

func (f *failing) Generate(_ context.Context, _ sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	if err := send(sdk.Chunk{TokenIDs: []uint32{7}, Text: "a"}); err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{}, f.err
}

func (f *failing) Abort(context.Context, []string) error { return nil }

// held is an engine error with held-back text, as vigil's tokenization
// gives one.
type held struct{ error }

func (held) HeldText() string { return "##" }
func (h held) Unwrap() error  { return h.error }

// A stream whose engine is lost after output (the adapter's
// ErrUnavailable, or the adapter gone) ends with Final.resume, the ids
// sent and the text held back, then RESUME_ELSEWHERE; an engine's own
// error after output is no reason to go elsewhere, nor is a failure of
// one of n choices.
func TestLostEngineResumesElsewhere(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		err    error
		n      uint32
		resume bool
		held   string
	}{
		{"engine lost", fmt.Errorf("vLLM request failed mid-stream: %w: gone", sdk.ErrUnavailable), 1, true, ""},
		{"adapter gone", sdk.ErrPluginExited, 1, true, ""},
		{"lost with held text", held{fmt.Errorf("x: %w", sdk.ErrUnavailable)}, 1, true, "##"},
		{"engine error", errors.New("vLLM request failed mid-stream: Internal: boom"), 1, false, ""},
		{"one of n", sdk.ErrUnavailable, 2, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, cl := serve(t, &failing{err: c.err}, worker, 0)
			s.Admit(true, "")
			req := prompt(1)
			req.N = c.n
			r := run(t.Context(), cl, req)
			if status.Code(r.err) != codes.Unavailable || r.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR {
				t.Fatalf("stream ended with %+v, want a final ERROR then UNAVAILABLE", r)
			}
			if got := workerapi.ResumeElsewhere(r.err); got != c.resume {
				t.Errorf("RESUME_ELSEWHERE: %v, want %v (%v)", got, c.resume, r.err)
			}
			rs := r.final.GetResume()
			if (rs != nil) != c.resume || c.resume && rs.GetOutputTokens() != 1 || rs.GetHeldText() != c.held {
				t.Errorf("Final.resume %v: want one (%v) with 1 output token and held %q", rs, c.resume, c.held)
			}
		})
	}
}

// A resumed stream is refused, naming the field, by a worker that does
// not list resume (no tokenizer), and when it asks for what cannot be
// resumed.
func TestResumeRefused(t *testing.T) {
	t.Parallel()
	s, cl := serve(t, &fakeEngine{}, worker, 0)
	s.Admit(true, "")
	req := prompt(1)
	req.Resume = &workerv1.Resume{PromptTokenIds: []uint32{1}, OutputTokenIds: []uint32{2}}
	r := run(t.Context(), cl, req)
	if status.Code(r.err) != codes.InvalidArgument || status.Convert(r.err).Message() != "resume: this worker does not take a resumed stream "+
		"(its engine has no such field, and it is not among the worker's capabilities, discovery metadata caps); omit it" {
		t.Errorf("resume without a tokenizer: %v, want INVALID_ARGUMENT naming resume", r.err)
	}
}
