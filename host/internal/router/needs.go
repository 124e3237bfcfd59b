package router

import (
	"fmt"
	"strings"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// needsOf lists what req asks of a worker beyond the basic request, as
// capability names (docs/worker-api.md, "Capabilities"), in parameter
// order: structured output, n, the penalties and logit_bias, stop strings,
// top_k, min_p, seed, min_tokens, ignore_eos, chat_template_kwargs,
// tools (offered, or a turn with calls or answering one: usesTools),
// logprobs (with its top alternatives), the prompt's logprobs,
// return_prompt. Neutral values (0, 1, empty) ask for nothing. The first
// need no worker meets is the one a 400 names.
func needsOf(req *workerv1.GenerateRequest) []discovery.Need {
	var needs []discovery.Need
	add := func(on bool, name string) {
		if on {
			needs = append(needs, discovery.Need{Name: name})
		}
	}
	if so := req.GetStructuredOutput(); so.GetKind() != nil {
		add(true, soNeed(so))
	}
	if n := req.GetN(); n > 1 {
		needs = append(needs, discovery.Need{Name: discovery.CapN, AtLeast: n})
	}
	s, st := req.GetSampling(), req.GetStopping()
	add(s.GetPresencePenalty() != 0, discovery.CapPresencePenalty)
	add(s.GetFrequencyPenalty() != 0, discovery.CapFrequencyPenalty)
	add(s != nil && s.RepetitionPenalty != nil && *s.RepetitionPenalty != 1, discovery.CapRepetitionPenalty)
	add(len(s.GetLogitBias()) > 0, discovery.CapLogitBias)
	add(len(st.GetStop()) > 0, discovery.CapStop)
	add(s.GetTopK() != 0, discovery.CapTopK)
	add(s.GetMinP() != 0, discovery.CapMinP)
	add(s != nil && s.Seed != nil, discovery.CapSeed)
	add(st.GetMinTokens() > 0, discovery.CapMinTokens)
	add(st.GetIgnoreEos(), discovery.CapIgnoreEOS)
	add(req.GetMessages().GetChatTemplateKwargs() != "", discovery.CapChatTemplateKwargs)
	add(usesTools(req.GetMessages()), discovery.CapTools)
	if lp := req.GetLogprobs(); lp.GetOutput() {
		needs = append(needs, discovery.Need{Name: discovery.CapLogprobs, AtLeast: lp.GetTop()})
	}
	if lp := req.GetLogprobs(); lp.GetPrompt() {
		needs = append(needs, discovery.Need{Name: discovery.CapPromptLogprobs, AtLeast: lp.GetPromptTop()})
	}
	add(req.GetReturnPrompt(), discovery.CapPromptTokenIDs)
	return needs
}

// capSet is a worker's capabilities as Pick matches them: read once per
// change of its registration, not per request, and shared by the workers
// that publish the same.
type capSet struct {
	items map[string]uint32
	// embed: the worker's model is an embedding model (it lists embed),
	// which takes embeddings and no generation.
	embed bool
}

// newCapSet reads c, LegacyCapabilities when not stated.
func newCapSet(c discovery.Capabilities) *capSet {
	if !c.Stated() {
		c = discovery.LegacyCapabilities
	}
	s := &capSet{items: map[string]uint32{}}
	for _, it := range c.Items() {
		s.items[it.Name] = it.Value
	}
	_, s.embed = s.items[discovery.CapEmbed]
	return s
}

// missing is the index in needs of the first that s does not meet, as
// discovery.Capabilities.Missing; -1 when s meets them all.
func (s *capSet) missing(needs []discovery.Need) int {
	for i, n := range needs {
		v, ok := s.items[n.Name]
		if !ok || (v != 0 && n.AtLeast > v) {
			return i
		}
	}
	return -1
}

// UnmetError is Pick's error when no worker of the model takes a request's
// need: INVALID_ARGUMENT naming the worker API's field. HTTP clients get
// 400 naming the OpenAI parameter that asked for it.
type UnmetError struct {
	Model string
	Need  discovery.Need
}

// needFields are the worker API's fields of the needs, for gRPC clients.
var needFields = map[string]string{
	discovery.CapN:                  "n",
	discovery.CapPresencePenalty:    "sampling.presence_penalty",
	discovery.CapFrequencyPenalty:   "sampling.frequency_penalty",
	discovery.CapRepetitionPenalty:  "sampling.repetition_penalty",
	discovery.CapLogitBias:          "sampling.logit_bias",
	discovery.CapTopK:               "sampling.top_k",
	discovery.CapMinP:               "sampling.min_p",
	discovery.CapSeed:               "sampling.seed",
	discovery.CapStop:               "stopping.stop",
	discovery.CapMinTokens:          "stopping.min_tokens",
	discovery.CapIgnoreEOS:          "stopping.ignore_eos",
	discovery.CapChatTemplateKwargs: "prompt.messages.chat_template_kwargs",
	discovery.CapTools:              "prompt.messages.tools",
	discovery.CapPromptTokenIDs:     "return_prompt",
	discovery.CapLogprobs:           "logprobs.top",
	discovery.CapPromptLogprobs:     "logprobs.prompt_top",
}

// field is the worker API's field of the need.
func (e *UnmetError) field() string {
	if f, ok := needFields[e.Need.Name]; ok {
		return f
	}
	if g, ok := strings.CutPrefix(e.Need.Name, "grammar."); ok && g != "" {
		return "structured_output.grammar"
	}
	return "structured_output." + e.Need.Name
}

// what says what the workers lack.
func (e *UnmetError) what() string {
	if e.Need.AtLeast > 0 {
		return fmt.Sprintf("%s of %d or more", e.Need.Name, e.Need.AtLeast)
	}
	return e.Need.Name
}

func (e *UnmetError) Error() string {
	return fmt.Sprintf("%s: no %s takes it (none lists the capability %s)%s", e.field(), describe(e.Model), e.what(), capHints[e.Need.Name])
}

// capHints say how a worker comes to take what vigil itself does with its
// tokenizer (stop strings on token ids, the prompt's text, template
// variables).
var capHints = map[string]string{
	discovery.CapStop:               "; a worker started with --tokenizer-dir matches stop strings itself",
	discovery.CapPromptTokenIDs:     "; a worker started with --tokenizer-dir gives the prompt's text",
	discovery.CapChatTemplateKwargs: "; a worker with a chat template (--tokenizer-dir, --chat-template) takes it",
	discovery.CapTools:              "; a worker started with --tokenizer-dir whose chat template renders tools takes them, and parses the calls",
	discovery.CapLogprobs:           logprobsHint,
	discovery.CapPromptLogprobs:     logprobsHint,
}

// logprobsHint says what a worker needs to give logprobs.
const logprobsHint = "; a worker gives logprobs when its engine returns them and it was started with --tokenizer-dir, which gives the tokens' text"

// GRPCStatus is the status gRPC clients of the router get.
func (e *UnmetError) GRPCStatus() *status.Status { return status.New(codes.InvalidArgument, e.Error()) }

// capMemo remembers what a few capability sets miss of one request's
// needs: the workers of a model share one set or a few, so each is
// matched once per pick, not once per worker.
type capMemo struct {
	sets    [4]*capSet
	missed  [4]int
	n, next int
}

// missing is s.missing(needs), remembered.
func (m *capMemo) missing(s *capSet, needs []discovery.Need) int {
	if len(needs) == 0 {
		return -1
	}
	for i := range m.n {
		if m.sets[i] == s {
			return m.missed[i]
		}
	}
	r := s.missing(needs)
	m.sets[m.next], m.missed[m.next] = s, r
	m.next = (m.next + 1) % len(m.sets)
	m.n = min(m.n+1, len(m.sets))
	return r
}
