package endpoint

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/textgen"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
)

// textEngine streams out's bytes as token ids (fakeTokenizer decodes them
// as bytes), three a chunk, and ends with a stop.
type textEngine struct {
	out  string
	mu   sync.Mutex
	last sdk.GenerateRequest
}

func (e *textEngine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	e.mu.Lock()
	e.last = req
	e.mu.Unlock()
	for i := 0; i < len(e.out); i += 3 {
		var ids []uint32
		for _, b := range []byte(e.out[i:min(i+3, len(e.out))]) {
			ids = append(ids, uint32(b))
		}
		if err := send(sdk.Chunk{TokenIDs: ids}); err != nil {
			return sdk.Result{}, err
		}
	}
	return sdk.Result{FinishReason: sdk.FinishStop, PromptTokens: 1, CompletionTokens: uint32(len(e.out))}, nil
}

func (e *textEngine) Abort(context.Context, []string) error { return nil }

// toolObserver counts what ToolCalls reports.
type toolObserver struct {
	mu                sync.Mutex
	failures, dropped int
}

func (o *toolObserver) Finished(Outcome, uint32, uint32) {}
func (o *toolObserver) ToolCalls(f, d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures += f
	o.dropped += d
}

const weatherTools = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`

// parsed is a stream's parts joined.
type parsed struct {
	content, reasoning string
	calls              []*workerv1.ToolCall
	reason             workerv1.FinishReason
}

func generateParsed(t *testing.T, c workerv1.WorkerClient, chat *workerv1.Messages) (parsed, error) {
	t.Helper()
	stream, err := c.Generate(context.Background(), &workerv1.GenerateRequest{Prompt: &workerv1.GenerateRequest_Messages{Messages: chat}})
	if err != nil {
		return parsed{}, err
	}
	var p parsed
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil {
			return p, err
		}
		if f := m.GetFinal(); f != nil {
			p.reason = f.GetFinishReason()
			continue
		}
		ch := m.GetChunk()
		p.content += ch.GetText()
		p.reasoning += ch.GetReasoningText()
		for _, d := range ch.GetToolCalls() {
			if int(d.GetIndex()) == len(p.calls) {
				p.calls = append(p.calls, &workerv1.ToolCall{})
			}
			tc := p.calls[d.GetIndex()]
			tc.Id += d.GetId()
			tc.Type += d.GetType()
			tc.Name += d.GetName()
			tc.Arguments += d.GetArguments()
		}
	}
}

func TestParsedOutput(t *testing.T) {
	t.Parallel()
	call := func(city string) string {
		return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" + city + "\"}}\n</tool_call>"
	}
	no := false
	for _, c := range []struct {
		name     string
		out      string
		parallel *bool
		want     parsed
		failures int
		dropped  int
	}{
		{name: "reasoning, content and a call", out: "<think>hm</think>ok" + call("Paris"),
			want: parsed{reasoning: "hm", content: "ok", calls: []*workerv1.ToolCall{{Type: "function", Name: "get_weather", Arguments: `{"city": "Paris"}`}},
				reason: workerv1.FinishReason_FINISH_REASON_TOOL_CALLS}},
		{name: "content only", out: "plain", want: parsed{content: "plain", reason: workerv1.FinishReason_FINISH_REASON_STOP}},
		{name: "parallel_tool_calls false keeps the first", out: call("Paris") + "\n" + call("Rome"), parallel: &no, dropped: 1,
			want: parsed{calls: []*workerv1.ToolCall{{Type: "function", Name: "get_weather", Arguments: `{"city": "Paris"}`}},
				reason: workerv1.FinishReason_FINISH_REASON_TOOL_CALLS}},
		{name: "malformed call is content", out: "<tool_call>{\"name\": \"get_weather\", \"arguments\": {oops}</tool_call>", failures: 1,
			want: parsed{content: "<tool_call>{\"name\": \"get_weather\", \"arguments\": {oops}</tool_call>", reason: workerv1.FinishReason_FINISH_REASON_STOP}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, client := serve(t, &textEngine{out: c.out}, worker, 4)
			obs := &toolObserver{}
			s.Observe(obs)
			s.Wrap(func(g sdk.Generator) sdk.Generator {
				return textgen.New(g, fakeTokenizer{}, 0).WithParsers("qwen3", "hermes")
			})
			s.Admit(true, "")
			got, err := generateParsed(t, client, &workerv1.Messages{Messages: []*workerv1.Message{{Role: "user", Content: "hi"}},
				Tools: weatherTools, ParallelToolCalls: c.parallel})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range got.calls {
				if !strings.HasPrefix(tc.Id, "call_") {
					t.Errorf("call id %q, want call_...", tc.Id)
				}
				tc.Id = ""
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(parsed{}), protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if obs.failures != c.failures || obs.dropped != c.dropped {
				t.Errorf("observed %d failures, %d dropped; want %d, %d", obs.failures, obs.dropped, c.failures, c.dropped)
			}
		})
	}
}

// TestToolChoiceConstrained: tool_choice required sends the engine a
// schema, and is refused naming tool_choice where the engine has none.
func TestToolChoiceConstrained(t *testing.T) {
	t.Parallel()
	required := &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Mode{Mode: workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}}
	chat := &workerv1.Messages{Messages: []*workerv1.Message{{Role: "user", Content: "hi"}}, Tools: weatherTools, ToolChoice: required}
	for _, accepts := range []string{"", discovery.CapJSONSchema} {
		e := &textEngine{out: `[{"name": "get_weather", "parameters": {"city": "Oslo"}}]`}
		w := worker
		w.Accepts = accepts
		s, client := serve(t, e, w, 4)
		s.Wrap(func(g sdk.Generator) sdk.Generator {
			return textgen.New(g, fakeTokenizer{}, 0).WithParsers("", "hermes")
		})
		s.Admit(true, "")
		got, err := generateParsed(t, client, chat)
		if accepts == "" {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "tool_choice") {
				t.Errorf("without json_schema: %v, want INVALID_ARGUMENT naming tool_choice", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got.calls) != 1 || got.calls[0].Name != "get_weather" || got.calls[0].Arguments != `{"city": "Oslo"}` {
			t.Errorf("calls %v, want get_weather {\"city\": \"Oslo\"}", got.calls)
		}
		if so := e.last.StructuredOutput; so == nil || !strings.Contains(so.Text, `"get_weather"`) {
			t.Errorf("engine's structured output %+v, want a schema naming get_weather", so)
		}
	}
}
