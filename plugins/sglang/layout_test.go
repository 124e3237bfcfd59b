package sglang_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/vigilhq/vigil/plugins/sglang"
	"github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk"
)

// What the adapter reports the engine takes, per layout: never stop (the
// gRPC server has no tokenizer), n, logit_bias or json_object.
var (
	releasedAccepts = []string{"frequency_penalty", "ignore_eos", "json_schema", "min_p", "min_tokens", "presence_penalty", "regex", "repetition_penalty", "top_k",
		"logprobs=20", "prompt_logprobs=20"}
	newAccepts = append(slices.Clone(releasedAccepts), "choice", "grammar.ebnf", "seed", "structural_tag")
)

// TestLayoutDetected: with layout auto the adapter tells the layout from
// the engine's state snapshots, shown by the worker's Accepts; the option
// overrides it. A snapshot without model and server info tells the
// released layout by its server_status (UP, once the engine loaded) but
// nothing of the new one, which then needs the option.
func TestLayoutDetected(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		cfg    mock.Config
		layout string // the option; "" leaves it out
		want   []string
	}{
		"released":                 {cfg: mock.Config{}, want: releasedAccepts},
		"new":                      {cfg: mock.Config{Layout: mock.LayoutNew}, want: newAccepts},
		"released, bare":           {cfg: mock.Config{BareSnapshots: true}, want: releasedAccepts},
		"released, bare, starting": {cfg: mock.Config{BareSnapshots: true, StartupDelay: 200 * time.Millisecond}, want: releasedAccepts},
		"new, auto":                {cfg: mock.Config{Layout: mock.LayoutNew}, layout: "auto", want: newAccepts},
		"new, bare, by option":     {cfg: mock.Config{Layout: mock.LayoutNew, BareSnapshots: true}, layout: "new", want: newAccepts},
		"released, by option":      {cfg: mock.Config{BareSnapshots: true}, layout: "released", want: releasedAccepts},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, addr := serveMock(t, tt.cfg)
			opts := map[string]string{}
			if tt.layout != "" {
				opts["layout"] = tt.layout
			}
			a := sglang.New()
			defer a.Shutdown(context.Background())
			w, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health, Options: opts})
			if err != nil {
				t.Fatalf("Start() = %v, want nil", err)
			}
			if diff := cmp.Diff(tt.want, strings.Split(w.Accepts, ",")); diff != "" {
				t.Errorf("Accepts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLayoutNotDetected: a new-layout engine whose snapshots fit both
// layouts is not guessed at: Start misses its deadline saying to set the
// option. The option is obeyed even when it is wrong: a new-layout engine
// read as released shows no server_status, so never serves.
func TestLayoutNotDetected(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		cfg  mock.Config
		opts map[string]string
		want string
	}{
		"new, bare": {mock.Config{Layout: mock.LayoutNew, BareSnapshots: true}, nil, "set --engine-option layout=released or layout=new"},
		"new read as released": {mock.Config{Layout: mock.LayoutNew}, map[string]string{"layout": "released"},
			"engine state: not serving: engine state UNSPECIFIED"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, addr := serveMock(t, tt.cfg)
			a := sglang.New()
			defer a.Shutdown(context.Background())
			_, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: 300 * time.Millisecond, Health: health, Options: tt.opts})
			if !errors.Is(err, sdk.ErrStartupDeadline) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start() = %v, want ErrStartupDeadline saying %q", err, tt.want)
			}
		})
	}
}

// lastSampling is the SamplingParams of the engine's last request, from the
// mock's record of it (GET /state last_request).
func lastSampling(t *testing.T, e *mock.Engine) *sglangpb.SamplingParams {
	t.Helper()
	var req sglangpb.GenerateRequest
	if err := protojson.Unmarshal(e.State().LastRequest, &req); err != nil {
		t.Fatalf("last_request %s: %v", e.State().LastRequest, err)
	}
	return req.GetSamplingParams()
}

func ptr[T any](v T) *T { return &v }

// TestGenerateFields: each sdk field lands in its SGLang field, per layout:
// penalties in 5 to 7, a JSON schema or regex in 14 and 15 on the released
// layout and in guided_decoding 17 on the new one, which alone takes seed,
// choice, EBNF and structural tags.
func TestGenerateFields(t *testing.T) {
	t.Parallel()
	base := &sglangpb.SamplingParams{MaxNewTokens: ptr(int32(2))}
	with := func(f func(p *sglangpb.SamplingParams)) *sglangpb.SamplingParams {
		p := &sglangpb.SamplingParams{MaxNewTokens: base.MaxNewTokens}
		f(p)
		return p
	}
	guided := func(g *sglangpb.GuidedDecoding) *sglangpb.SamplingParams {
		return with(func(p *sglangpb.SamplingParams) { p.GuidedDecoding = g })
	}
	schema := &sdk.StructuredOutput{Kind: sdk.StructuredJSONSchema, Text: `{"type":"object"}`}
	regex := &sdk.StructuredOutput{Kind: sdk.StructuredRegex, Text: `a+`}
	tests := []struct {
		name   string
		layout mock.Layout
		req    sdk.GenerateRequest
		want   *sglangpb.SamplingParams
	}{
		{"penalties", mock.LayoutReleased, sdk.GenerateRequest{PresencePenalty: 0.5, FrequencyPenalty: -1, RepetitionPenalty: ptr(float32(1.25))},
			with(func(p *sglangpb.SamplingParams) {
				p.PresencePenalty, p.FrequencyPenalty, p.RepetitionPenalty = ptr(float32(0.5)), ptr(float32(-1)), ptr(float32(1.25))
			})},
		{"penalties, new", mock.LayoutNew, sdk.GenerateRequest{PresencePenalty: 0.5}, with(func(p *sglangpb.SamplingParams) { p.PresencePenalty = ptr(float32(0.5)) })},
		{"no penalties", mock.LayoutReleased, sdk.GenerateRequest{}, base},
		{"json schema", mock.LayoutReleased, sdk.GenerateRequest{StructuredOutput: schema}, with(func(p *sglangpb.SamplingParams) { p.JsonSchema = &schema.Text })},
		{"regex", mock.LayoutReleased, sdk.GenerateRequest{StructuredOutput: regex}, with(func(p *sglangpb.SamplingParams) { p.Regex = &regex.Text })},
		{"json schema, new", mock.LayoutNew, sdk.GenerateRequest{StructuredOutput: schema},
			guided(&sglangpb.GuidedDecoding{Constraint: &sglangpb.GuidedDecoding_JsonSchema{JsonSchema: schema.Text}})},
		{"regex, new", mock.LayoutNew, sdk.GenerateRequest{StructuredOutput: regex},
			guided(&sglangpb.GuidedDecoding{Constraint: &sglangpb.GuidedDecoding_Regex{Regex: regex.Text}})},
		{"choice, new", mock.LayoutNew, sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredChoice, Choices: []string{"yes", "no"}}},
			guided(&sglangpb.GuidedDecoding{Constraint: &sglangpb.GuidedDecoding_Choice{Choice: &sglangpb.ChoiceConstraint{Values: []string{"yes", "no"}}}})},
		{"ebnf, new", mock.LayoutNew, sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "ebnf", Text: `root ::= "a"`}},
			guided(&sglangpb.GuidedDecoding{Constraint: &sglangpb.GuidedDecoding_Ebnf{Ebnf: `root ::= "a"`}})},
		{"structural tag, new", mock.LayoutNew, sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredTag, Text: `{"type":"x"}`}},
			guided(&sglangpb.GuidedDecoding{Constraint: &sglangpb.GuidedDecoding_StructuralTag{StructuralTag: `{"type":"x"}`}})},
		{"seed, new", mock.LayoutNew, sdk.GenerateRequest{Seed: ptr(int64(-7))}, with(func(p *sglangpb.SamplingParams) { p.Seed = ptr(int64(-7)) })},
	}
	engines := map[mock.Layout]*mock.Engine{}
	adapters := map[mock.Layout]*sglang.Adapter{}
	for _, layout := range layouts {
		e, addr := serveMock(t, mock.Config{Layout: layout})
		engines[layout], adapters[layout] = e, started(t, addr, nil)
	}
	for _, tt := range tests {
		req := tt.req
		req.RequestID, req.TokenIDs, req.MaxTokens = tt.name, []uint32{1, 2}, 2
		if _, err := adapters[tt.layout].Generate(t.Context(), req, func(sdk.Chunk) error { return nil }); err != nil {
			t.Errorf("%s: Generate() = %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, lastSampling(t, engines[tt.layout]), protocmp.Transform()); diff != "" {
			t.Errorf("%s: the engine's sampling_params (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestGenerateRefusedByLayout: what a layout, or SGLang, has no field for
// is refused naming the parameter, and the engine gets no request, so
// nothing is dropped on the way. Stop strings are refused on both: the
// gRPC server has no tokenizer.
func TestGenerateRefusedByLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		layout mock.Layout
		req    sdk.GenerateRequest
		want   string
	}{
		{mock.LayoutReleased, sdk.GenerateRequest{Seed: ptr(int64(1))}, "seed: SGLang's released sglang.runtime.v1 layout takes no sampling seed"},
		{mock.LayoutReleased, sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredChoice, Choices: []string{"a"}}}, "choice: SGLang's released"},
		{mock.LayoutReleased, sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "ebnf", Text: "x"}}, "grammar.ebnf: SGLang's released"},
		{mock.LayoutReleased, sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredTag, Text: "{}"}}, "structural_tag: SGLang's released"},
	}
	for _, layout := range layouts {
		tests = append(tests, []struct {
			layout mock.Layout
			req    sdk.GenerateRequest
			want   string
		}{
			{layout, sdk.GenerateRequest{Stop: []string{"\n"}}, "stop: SGLang's gRPC server runs without a tokenizer"},
			{layout, sdk.GenerateRequest{LogitBias: map[uint32]float32{3: 1}}, "logit_bias: SGLang's generate API"},
			{layout, sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredJSONObject}}, "json_object: SGLang has no JSON-object mode"},
			{layout, sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "lark", Text: "x"}}, "grammar.lark: SGLang takes EBNF grammars only"},
		}...)
	}
	for _, tt := range tests {
		e, addr := serveMock(t, mock.Config{Layout: tt.layout})
		req := tt.req
		req.RequestID, req.TokenIDs = "r", []uint32{1}
		_, err := started(t, addr, nil).Generate(t.Context(), req, func(sdk.Chunk) error { return nil })
		if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Generate() = %v, want ErrInvalidArgument containing %q", tt.layout, err, tt.want)
		}
		if got := e.State().LastRequest; got != nil {
			t.Errorf("%s: the engine got %s, want no request", tt.layout, got)
		}
	}
}

// TestGenerateCachedTokens: meta_info's cached_tokens reaches the result.
func TestGenerateCachedTokens(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{})
	a := started(t, addr, nil)
	req := sdk.GenerateRequest{RequestID: "c1", TokenIDs: []uint32{5, 6, 7, 8}, MaxTokens: 1}
	var got []uint32
	for range 2 {
		res, err := a.Generate(t.Context(), req, func(sdk.Chunk) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.CachedTokens)
	}
	if diff := cmp.Diff([]uint32{0, 3}, got); diff != "" {
		t.Errorf("cached tokens of a prompt and of it again (-want +got):\n%s", diff)
	}
}
