package sdk

import (
	"strings"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func capabilitiesToProto(c Capabilities) *pluginv1.Capabilities {
	return &pluginv1.Capabilities{Readiness: c.Readiness, Generate: c.Generate, Abort: c.Abort, Embed: c.Embed}
}

func capabilitiesFromProto(c *pluginv1.Capabilities) Capabilities {
	return Capabilities{Readiness: c.GetReadiness(), Generate: c.GetGenerate(), Abort: c.GetAbort(), Embed: c.GetEmbed()}
}

func startRequestToProto(r StartRequest) *pluginv1.StartRequest {
	return &pluginv1.StartRequest{
		EngineAddr:      r.EngineAddr,
		StartupDeadline: durationpb.New(r.StartupDeadline),
		Health: &pluginv1.HealthPolicy{
			Interval:    durationpb.New(r.Health.Interval),
			Timeout:     durationpb.New(r.Health.Timeout),
			Failures:    uint32(r.Health.Failures),
			RetryMax:    durationpb.New(r.Health.RetryMax),
			BusyTimeout: durationpb.New(r.Health.BusyTimeout),
			Confirm:     durationpb.New(r.Health.Confirm),
		},
		Options: r.Options,
	}
}

func startRequestFromProto(r *pluginv1.StartRequest) StartRequest {
	h := r.GetHealth()
	return StartRequest{
		EngineAddr:      r.GetEngineAddr(),
		StartupDeadline: r.GetStartupDeadline().AsDuration(),
		Health: HealthPolicy{
			Interval:    h.GetInterval().AsDuration(),
			Timeout:     h.GetTimeout().AsDuration(),
			Failures:    int(h.GetFailures()),
			RetryMax:    h.GetRetryMax().AsDuration(),
			BusyTimeout: h.GetBusyTimeout().AsDuration(),
			Confirm:     h.GetConfirm().AsDuration(),
		},
		Options: r.GetOptions(),
	}
}

func workerToProto(w Worker) *pluginv1.Worker {
	return &pluginv1.Worker{
		ModelId:           w.ModelID,
		ServedModelName:   w.ServedModelName,
		EngineVersion:     w.EngineVersion,
		InstanceId:        w.InstanceID,
		MaxModelLen:       w.MaxModelLen,
		KvBlockSize:       w.KVBlockSize,
		SupportsTextInput: w.SupportsTextInput,
		Accepts:           splitAccepts(w.Accepts),
		ReasoningParser:   w.ReasoningParser,
		ToolCallParser:    w.ToolCallParser,
	}
}

func workerFromProto(w *pluginv1.Worker) Worker {
	return Worker{
		ModelID:           w.GetModelId(),
		ServedModelName:   w.GetServedModelName(),
		EngineVersion:     w.GetEngineVersion(),
		InstanceID:        w.GetInstanceId(),
		MaxModelLen:       w.GetMaxModelLen(),
		KVBlockSize:       w.GetKvBlockSize(),
		SupportsTextInput: w.GetSupportsTextInput(),
		Accepts:           strings.Join(w.GetAccepts(), ","),
		ReasoningParser:   w.GetReasoningParser(),
		ToolCallParser:    w.GetToolCallParser(),
	}
}

func eventToProto(e Event) *pluginv1.AvailabilityEvent {
	return &pluginv1.AvailabilityEvent{
		Availability: pluginv1.Availability(e.Availability),
		Reason:       e.Reason,
		Time:         timestamppb.New(e.Time),
		Busy:         e.Busy,
	}
}

func eventFromProto(e *pluginv1.AvailabilityEvent) Event {
	a := Availability(e.GetAvailability())
	if a < Serving || a > Draining {
		a = Lost // an unknown state cannot be trusted to serve
	}
	return Event{Availability: a, Reason: e.GetReason(), Time: e.GetTime().AsTime(), Busy: e.GetBusy() && a == Serving}
}

func generateRequestToProto(r GenerateRequest) *pluginv1.GenerateRequest {
	p := &pluginv1.GenerateRequest{
		RequestId:    r.RequestID,
		Temperature:  r.Temperature,
		TopP:         r.TopP,
		TopK:         r.TopK,
		Seed:         r.Seed,
		MaxTokens:    r.MaxTokens,
		StopTokenIds: r.StopTokenIDs,
		Stop:         r.Stop,
		IgnoreEos:    r.IgnoreEOS,
		MinTokens:    r.MinTokens,
		MinP:         r.MinP,

		PresencePenalty:   r.PresencePenalty,
		FrequencyPenalty:  r.FrequencyPenalty,
		RepetitionPenalty: r.RepetitionPenalty,
		LogitBias:         r.LogitBias,
		StructuredOutput:  structuredToProto(r.StructuredOutput),
		Logprobs:          logprobsToProto(r.Logprobs),
	}
	if r.TokenIDs != nil {
		p.Prompt = &pluginv1.GenerateRequest_TokenIds{TokenIds: &pluginv1.TokenIds{Ids: r.TokenIDs}}
	} else {
		p.Prompt = &pluginv1.GenerateRequest_Text{Text: r.Text}
	}
	return p
}

func generateRequestFromProto(p *pluginv1.GenerateRequest) GenerateRequest {
	r := GenerateRequest{
		RequestID:    p.GetRequestId(),
		Text:         p.GetText(),
		Temperature:  p.Temperature,
		TopP:         p.TopP,
		TopK:         p.TopK,
		Seed:         p.Seed,
		MaxTokens:    p.GetMaxTokens(),
		StopTokenIDs: p.GetStopTokenIds(),
		Stop:         p.GetStop(),
		IgnoreEOS:    p.GetIgnoreEos(),
		MinTokens:    p.GetMinTokens(),
		MinP:         p.GetMinP(),

		PresencePenalty:   p.GetPresencePenalty(),
		FrequencyPenalty:  p.GetFrequencyPenalty(),
		RepetitionPenalty: p.RepetitionPenalty,
		LogitBias:         p.GetLogitBias(),
		StructuredOutput:  structuredFromProto(p.GetStructuredOutput()),
		Logprobs:          logprobsFromProto(p.GetLogprobs()),
	}
	if ids := p.GetTokenIds(); ids != nil {
		r.TokenIDs = ids.GetIds()
		if r.TokenIDs == nil {
			r.TokenIDs = []uint32{}
		}
	}
	return r
}

func resultToProto(r Result) *pluginv1.Final {
	return &pluginv1.Final{
		FinishReason:     pluginv1.FinishReason(r.FinishReason),
		PromptTokens:     r.PromptTokens,
		CompletionTokens: r.CompletionTokens,
		CachedTokens:     r.CachedTokens,
	}
}

func resultFromProto(f *pluginv1.Final) Result {
	return Result{
		FinishReason:     FinishReason(f.GetFinishReason()),
		PromptTokens:     f.GetPromptTokens(),
		CompletionTokens: f.GetCompletionTokens(),
		CachedTokens:     f.GetCachedTokens(),
	}
}

func structuredToProto(o *StructuredOutput) *pluginv1.StructuredOutput {
	if o == nil {
		return nil
	}
	p := &pluginv1.StructuredOutput{}
	switch o.Kind {
	case StructuredJSONObject:
		p.Kind = &pluginv1.StructuredOutput_JsonObject{JsonObject: true}
	case StructuredJSONSchema:
		p.Kind = &pluginv1.StructuredOutput_JsonSchema{JsonSchema: o.Text}
	case StructuredRegex:
		p.Kind = &pluginv1.StructuredOutput_Regex{Regex: o.Text}
	case StructuredChoice:
		p.Kind = &pluginv1.StructuredOutput_Choice{Choice: &pluginv1.Choice{Choices: o.Choices}}
	case StructuredGrammar:
		p.Kind = &pluginv1.StructuredOutput_Grammar{Grammar: &pluginv1.Grammar{Dialect: o.Dialect, Text: o.Text}}
	case StructuredTag:
		p.Kind = &pluginv1.StructuredOutput_StructuralTag{StructuralTag: o.Text}
	default:
		return nil
	}
	return p
}

// structuredFromProto reads a constraint; an unset or unknown kind (a newer
// host's) is nil, which the sdk's field check has already refused.
func structuredFromProto(p *pluginv1.StructuredOutput) *StructuredOutput {
	switch k := p.GetKind().(type) {
	case *pluginv1.StructuredOutput_JsonObject:
		return &StructuredOutput{Kind: StructuredJSONObject}
	case *pluginv1.StructuredOutput_JsonSchema:
		return &StructuredOutput{Kind: StructuredJSONSchema, Text: k.JsonSchema}
	case *pluginv1.StructuredOutput_Regex:
		return &StructuredOutput{Kind: StructuredRegex, Text: k.Regex}
	case *pluginv1.StructuredOutput_Choice:
		return &StructuredOutput{Kind: StructuredChoice, Choices: k.Choice.GetChoices()}
	case *pluginv1.StructuredOutput_Grammar:
		return &StructuredOutput{Kind: StructuredGrammar, Dialect: k.Grammar.GetDialect(), Text: k.Grammar.GetText()}
	case *pluginv1.StructuredOutput_StructuralTag:
		return &StructuredOutput{Kind: StructuredTag, Text: k.StructuralTag}
	}
	return nil
}

// splitAccepts is Worker.Accepts as the proto's list; "" is none listed.
func splitAccepts(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
