package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/textgen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

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

// continuing streams out's bytes as token ids, one a chunk, going on
// from the output its prompt already holds (the prompt is prompt ids
// long), and fails, the engine lost, before byte failAt (-1: never).
type continuing struct {
	out            string
	prompt, failAt int
}

func (e *continuing) Generate(_ context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	start := len(req.TokenIDs) - e.prompt
	for i := start; i < len(e.out); i++ {
		if i == e.failAt {
			return sdk.Result{}, fmt.Errorf("%w: engine lost", sdk.ErrUnavailable)
		}
		if err := send(sdk.Chunk{TokenIDs: []uint32{uint32(e.out[i])}}); err != nil {
			return sdk.Result{}, err
		}
	}
	return sdk.Result{FinishReason: sdk.FinishStop, PromptTokens: uint32(len(req.TokenIDs)), CompletionTokens: uint32(len(e.out) - start)}, nil
}

func (e *continuing) Abort(context.Context, []string) error { return nil }

// stream is what one Generate stream gave: the prompt's ids, the output
// ids, the parsed parts, the final and the status.
type stream struct {
	prompt, ids []uint32
	parsed
	final *workerv1.Final
	err   error
}

func (s *stream) read(t *testing.T, c workerv1.WorkerClient, req *workerv1.GenerateRequest) {
	t.Helper()
	st, err := c.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			return
		}
		s.prompt = append(s.prompt, m.GetPrompt().GetTokenIds()...)
		if f := m.GetFinal(); f != nil {
			s.final, s.reason = f, f.GetFinishReason()
		}
		ch := m.GetChunk()
		s.ids = append(s.ids, ch.GetTokenIds()...)
		s.content += ch.GetText()
		s.reasoning += ch.GetReasoningText()
		for _, d := range ch.GetToolCalls() {
			if int(d.GetIndex()) == len(s.calls) {
				s.calls = append(s.calls, &workerv1.ToolCall{})
			}
			tc := s.calls[d.GetIndex()]
			tc.Type, tc.Name, tc.Arguments = tc.Type+d.GetType(), tc.Name+d.GetName(), tc.Arguments+d.GetArguments()
		}
	}
}

// A chat stream cut after any byte and resumed on a worker from the ids,
// the prompt's ids and the held text the first gave is, parsed, the
// stream that was not cut: the reasoning, the content and the tool call
// once each, the finish tool_calls; a stop string's possible start held
// across the cut included.
func TestResumedParsedOutput(t *testing.T) {
	t.Parallel()
	out := "<think>hm</think>ok<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\nbye"
	msgs := &workerv1.Messages{Messages: []*workerv1.Message{{Role: "user", Content: "hi"}}, Tools: weatherTools}
	request := func() *workerv1.GenerateRequest {
		return &workerv1.GenerateRequest{Prompt: &workerv1.GenerateRequest_Messages{Messages: msgs},
			Stopping: &workerv1.Stopping{Stop: []string{"</tool_call>X"}}}
	}
	worker := func(failAt int) workerv1.WorkerClient {
		prompt, _, _ := fakeTokenizer{}.ChatTokens(textgen.Chat{Messages: []textgen.Message{{Role: "user", Content: "hi"}}})
		s, c := serve(t, &continuing{out: out, prompt: len(prompt), failAt: failAt}, worker, 4)
		s.Wrap(func(g sdk.Generator) sdk.Generator {
			return textgen.New(g, fakeTokenizer{}, 0).WithParsers("qwen3", "hermes")
		})
		s.Admit(true, "")
		return c
	}
	var want stream
	want.read(t, worker(-1), request())
	second := worker(-1)
	for k := 1; k < len(out); k++ {
		var first stream
		req := request()
		req.ReturnPrompt = true
		first.read(t, worker(k), req)
		rs := first.final.GetResume()
		if !workerapi.ResumeElsewhere(first.err) || rs.GetOutputTokens() != uint32(len(first.ids)) {
			t.Fatalf("cut at %d: %v, resume %v; want RESUME_ELSEWHERE with the ids sent", k, first.err, rs)
		}
		req = request()
		req.Resume = &workerv1.Resume{PromptTokenIds: first.prompt, OutputTokenIds: first.ids, HeldText: proto.String(rs.GetHeldText())}
		got := first
		got.err = nil
		got.read(t, second, req)
		if got.err != nil {
			t.Fatalf("cut at %d: resumed: %v", k, got.err)
		}
		if diff := cmp.Diff(want.parsed, got.parsed, cmp.AllowUnexported(parsed{}), protocmp.Transform()); diff != "" {
			t.Errorf("cut at %d (held %q): (-whole +resumed):\n%s", k, rs.GetHeldText(), diff)
		}
		if u := got.final.GetUsage(); u.GetCompletionTokens() != uint32(len(out)) {
			t.Errorf("cut at %d: usage %v, want %d completion tokens", k, u, len(out))
		}
	}
}
