package endpoint

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The engines' parts of Worker.Accepts as these tests stand them in
// (the adapters list their own): vLLM takes every field of this round,
// SGLang no json_object, logit_bias or choice, TensorRT-LLM no choice.
var (
	vllmAccepts = []string{"top_k", "min_p", "seed", "stop", "min_tokens", "ignore_eos", "presence_penalty",
		"frequency_penalty", "repetition_penalty", "logit_bias", "json_object", "json_schema", "regex", "choice",
		"grammar.ebnf", "grammar.lark", "structural_tag", "logprobs=20"}
	sglangAccepts = []string{"top_k", "min_p", "min_tokens", "ignore_eos", "presence_penalty", "frequency_penalty",
		"repetition_penalty", "json_schema", "regex", "grammar.ebnf", "structural_tag"}
	trtllmAccepts = []string{"top_k", "seed", "stop", "min_tokens", "ignore_eos", "presence_penalty", "frequency_penalty",
		"repetition_penalty", "logit_bias", "json_object", "json_schema", "regex", "grammar.ebnf"}
)

// accepting is worker listing items, "none" for no item (an empty list is
// an adapter's that predates Accepts).
func accepting(items ...string) sdk.Worker {
	w := worker
	w.Accepts = "none"
	if len(items) > 0 {
		w.Accepts = strings.Join(items, ",")
	}
	return w
}

// all reads a whole stream: every message, and its error.
func all(ctx context.Context, c workerv1.WorkerClient, req *workerv1.GenerateRequest) ([]*workerv1.GenerateResponse, error) {
	stream, err := c.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*workerv1.GenerateResponse
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

func f32(v float32) *float32 { return &v }

// The penalties and logit bias reach the engine as they were sent.
func TestPenaltiesForwarded(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{}
	s, c := serve(t, e, accepting(vllmAccepts...), 0)
	s.Admit(true, "")
	req := prompt(1)
	req.Sampling = &workerv1.Sampling{PresencePenalty: 0.5, FrequencyPenalty: -1, RepetitionPenalty: f32(1.2), LogitBias: map[uint32]float32{7: -100, 9: 5}}
	if r := run(t.Context(), c, req); r.err != nil {
		t.Fatal(r.err)
	}
	e.mu.Lock()
	got := e.last
	e.mu.Unlock()
	if got.PresencePenalty != 0.5 || got.FrequencyPenalty != -1 || got.RepetitionPenalty == nil || *got.RepetitionPenalty != 1.2 ||
		!cmp.Equal(got.LogitBias, map[uint32]float32{7: -100, 9: 5}) {
		t.Errorf("engine request: presence %v frequency %v repetition %v logit_bias %v; want 0.5, -1, 1.2, {7:-100 9:5}",
			got.PresencePenalty, got.FrequencyPenalty, got.RepetitionPenalty, got.LogitBias)
	}
}

// Each kind of structured output reaches each engine as a kind it has:
// choice as an escaped regex where the engine has regexes only
// (TensorRT-LLM), json_object as the schema {"type":"object"} where it has
// schemas only (SGLang); what an engine cannot do is refused, naming the
// field and the parameter a client sent.
func TestStructuredOutput(t *testing.T) {
	t.Parallel()
	choice := &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Choice{Choice: &workerv1.Choice{Choices: []string{"yes", "a.b|c"}}}}
	object := &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonObject{JsonObject: true}}
	lark := &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Grammar{Grammar: &workerv1.Grammar{Dialect: "lark", Text: "start: x"}}}
	schema := &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonSchema{JsonSchema: &workerv1.JsonSchema{Schema: `{"type":"string"}`, Strict: true, Name: "s"}}}
	for _, c := range []struct {
		name    string
		accepts []string
		so      *workerv1.StructuredOutput
		want    *sdk.StructuredOutput
		refusal string
	}{
		{"vllm choice", vllmAccepts, choice, &sdk.StructuredOutput{Kind: sdk.StructuredChoice, Choices: []string{"yes", "a.b|c"}}, ""},
		{"trtllm choice", trtllmAccepts, choice, &sdk.StructuredOutput{Kind: sdk.StructuredRegex, Text: `(yes|a\.b\|c)`}, ""},
		{"vllm json_object", vllmAccepts, object, &sdk.StructuredOutput{Kind: sdk.StructuredJSONObject}, ""},
		{"sglang json_object", sglangAccepts, object, &sdk.StructuredOutput{Kind: sdk.StructuredJSONSchema, Text: `{"type":"object"}`}, ""},
		{"sglang schema", sglangAccepts, schema, &sdk.StructuredOutput{Kind: sdk.StructuredJSONSchema, Text: `{"type":"string"}`}, ""},
		{"vllm lark", vllmAccepts, lark, &sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "lark", Text: "start: x"}, ""},
		{"sglang lark", sglangAccepts, lark, nil, `structured_output.grammar.dialect: "lark": this worker's engine takes ebnf`},
		{"legacy choice", nil, choice, nil, "structured_output.choice: this worker does not take guided_choice"},
		{"legacy json_object", nil, object, nil, "structured_output.json_object: this worker does not take response_format json_object"},
		{"bad schema", vllmAccepts, &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonSchema{JsonSchema: &workerv1.JsonSchema{Schema: "[1]"}}},
			nil, "structured_output.json_schema.schema: want a JSON schema, a JSON object"},
		{"no choices", vllmAccepts, &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Choice{Choice: &workerv1.Choice{}}},
			nil, "structured_output.choice.choices: must list at least one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &fakeEngine{}
			s, cl := serve(t, e, accepting(c.accepts...), 0)
			if c.accepts == nil {
				s.Attach(e, worker) // an adapter that lists nothing
			}
			s.Admit(true, "")
			req := prompt(1)
			req.StructuredOutput = c.so
			r := run(t.Context(), cl, req)
			if c.refusal != "" {
				if status.Code(r.err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(r.err).Message(), c.refusal) {
					t.Fatalf("err = %v, want InvalidArgument beginning %q", r.err, c.refusal)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if diff := cmp.Diff(c.want, e.last.StructuredOutput); diff != "" {
				t.Errorf("engine's structured output (-want +got):\n%s", diff)
			}
		})
	}
}

// A field the engine does not list is refused, naming it, and never
// reaches the engine; an adapter that lists nothing takes the fields of
// v0.1.0, stop strings among them.
func TestFieldsNotTaken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		w       sdk.Worker
		mutate  func(*workerv1.GenerateRequest)
		refusal string
	}{
		{"logit_bias on sglang", accepting(sglangAccepts...), func(r *workerv1.GenerateRequest) {
			r.Sampling = &workerv1.Sampling{LogitBias: map[uint32]float32{1: 1}}
		}, "sampling.logit_bias: this worker does not take logit_bias"},
		{"seed on sglang", accepting(sglangAccepts...), func(r *workerv1.GenerateRequest) {
			r.Sampling = &workerv1.Sampling{Seed: proto.Int64(1)}
		}, "sampling.seed: this worker does not take seed"},
		{"stop on sglang without a tokenizer", accepting(sglangAccepts...), func(r *workerv1.GenerateRequest) {
			r.Stopping = &workerv1.Stopping{Stop: []string{"x"}}
		}, "stopping.stop: this worker's engine does not match stop strings"},
		{"echo without a tokenizer", accepting(vllmAccepts...), func(r *workerv1.GenerateRequest) { r.ReturnPrompt = true },
			"return_prompt (echo): this worker has no tokenizer"},
		{"presence_penalty legacy", worker, func(r *workerv1.GenerateRequest) {
			r.Sampling = &workerv1.Sampling{PresencePenalty: 1}
		}, "sampling.presence_penalty: this worker does not take presence_penalty"},
		{"presence_penalty range", accepting(vllmAccepts...), func(r *workerv1.GenerateRequest) {
			r.Sampling = &workerv1.Sampling{PresencePenalty: 3}
		}, "sampling.presence_penalty: 3: must be in [-2, 2]"},
		{"logit_bias range", accepting(vllmAccepts...), func(r *workerv1.GenerateRequest) {
			r.Sampling = &workerv1.Sampling{LogitBias: map[uint32]float32{4: 101}}
		}, "sampling.logit_bias: token 4: 101: a bias must be in [-100, 100]"},
		{"logprobs", accepting(vllmAccepts...), func(r *workerv1.GenerateRequest) { r.Logprobs = &workerv1.Logprobs{Output: true} },
			"logprobs.output: this worker gives no logprobs (chat's top_logprobs): it has no tokenizer"},
		{"resume", accepting(vllmAccepts...), func(r *workerv1.GenerateRequest) { r.Resume = &workerv1.Resume{} },
			"resume: this worker does not take a resumed stream"},
		{"stop legacy", worker, func(r *workerv1.GenerateRequest) { r.Stopping = &workerv1.Stopping{Stop: []string{"x"}} }, ""},
		{"repetition_penalty 1 is none", worker, func(r *workerv1.GenerateRequest) { r.Sampling = &workerv1.Sampling{RepetitionPenalty: f32(1)} }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &fakeEngine{}
			s, cl := serve(t, e, c.w, 0)
			s.Admit(true, "")
			req := prompt(1)
			c.mutate(req)
			r := run(t.Context(), cl, req)
			if c.refusal == "" {
				if r.err != nil {
					t.Fatal(r.err)
				}
				return
			}
			if status.Code(r.err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(r.err).Message(), c.refusal) {
				t.Errorf("err = %v, want InvalidArgument beginning %q", r.err, c.refusal)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if len(e.ids) != 0 {
				t.Errorf("the engine got %d requests, want none", len(e.ids))
			}
		})
	}
}

// The final message carries the engine's cached prompt tokens.
func TestCachedTokens(t *testing.T) {
	t.Parallel()
	s, c := serve(t, cachedEngine{}, worker, 0)
	s.Admit(true, "")
	r := run(t.Context(), c, prompt(1, 2, 3))
	if r.err != nil || r.final.GetUsage().GetCachedTokens() != 2 {
		t.Errorf("final %v, %v; want usage.cached_tokens 2", r.final, r.err)
	}
}

// cachedEngine answers one token, two of three prompt tokens cached.
type cachedEngine struct{}

func (cachedEngine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	if err := send(sdk.Chunk{TokenIDs: []uint32{5}}); err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{FinishReason: sdk.FinishStop, PromptTokens: 3, CompletionTokens: 1, CachedTokens: 2}, nil
}

func (cachedEngine) Abort(context.Context, []string) error { return nil }
