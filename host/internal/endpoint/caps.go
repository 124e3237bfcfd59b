package endpoint

import (
	"strings"

	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/sdk"
)

// MaxN is the largest GenerateRequest.n the worker fans out (each choice
// is an engine request of its own); --max-inflight lowers it.
const MaxN = 128

// passed are the capabilities of the engine that the worker passes on
// (to sdk.GenerateRequest's fields) in this release; an engine's other
// items (logprobs, embed...) wait for the worker to implement them.
var passed = map[string]bool{
	discovery.CapTopK: true, discovery.CapMinP: true, discovery.CapSeed: true, discovery.CapStop: true,
	discovery.CapMinTokens: true, discovery.CapIgnoreEOS: true,
	discovery.CapPresencePenalty: true, discovery.CapFrequencyPenalty: true,
	discovery.CapRepetitionPenalty: true, discovery.CapLogitBias: true,
	discovery.CapJSONObject: true, discovery.CapJSONSchema: true, discovery.CapRegex: true,
	discovery.CapChoice: true, discovery.CapStructuralTag: true,
}

// grammarPrefix begins the capability of a grammar dialect.
const grammarPrefix = "grammar."

// accepts is what a worker takes, decided at Attach and Wrap: the
// engine's part (sdk.Worker.Accepts) and what vigil does itself.
type accepts struct {
	engine    map[string]bool // the engine's items the worker passes on
	tokenizer bool            // vigil tokenizes: stop strings, the prompt's ids
	chat      bool            // a chat template: chat_template_kwargs
	tools     bool            // a chat template and a tool-call parser: tools
	reasoning bool            // a reasoning parser
	tokenize  bool            // the Tokenize and Detokenize RPCs (Tokens)
	resume    bool            // streams other workers began (Resumes)
	maxN      uint32
	// embedModel: the engine's model is an embedding model (its Accepts
	// lists embed), which takes no generation request; embed: and the
	// adapter serves Embed, so the worker does.
	embedModel, embed bool
	// logprobs are the engine's logprobs and prompt_logprobs items, their
	// most alternatives a position, when vigil gives their token text
	// (LogprobTokens).
	logprobs map[string]uint32
}

// newAccepts reads w.Accepts (nil: the legacy set of an older adapter)
// for an engine wrapped as engine, attached as raw, with maxInflight
// engine requests at most.
func newAccepts(w sdk.Worker, engine, raw sdk.Generator, maxInflight int) accepts {
	items := discovery.LegacyCapabilities.Items()
	if w.Accepts != "" {
		items = discovery.ParseCapabilities(w.Accepts).Items()
	}
	a := accepts{engine: map[string]bool{}, maxN: uint32(min(MaxN, maxInflight))}
	text := logprobTokens(engine) != nil
	for _, it := range items {
		switch {
		case passed[it.Name] || strings.HasPrefix(it.Name, grammarPrefix):
			a.engine[it.Name] = true
		case (it.Name == discovery.CapLogprobs || it.Name == discovery.CapPromptLogprobs) && text:
			if a.logprobs == nil {
				a.logprobs = map[string]uint32{}
			}
			a.logprobs[it.Name] = it.Value
		}
		a.embedModel = a.embedModel || it.Name == discovery.CapEmbed
	}
	_, embedder := raw.(sdk.Embedder)
	a.embed = a.embedModel && embedder
	if p, ok := engine.(Prompts); ok {
		a.tokenizer, a.chat = p.TakesText(), p.TakesChat()
	}
	if t, ok := engine.(Tokens); ok {
		a.tokenize = t.CanTokenize()
	}
	if r, ok := engine.(Resumes); ok {
		a.resume = a.tokenizer && r.CanResume()
	}
	if p, ok := engine.(Parsers); ok && a.chat {
		a.tools, a.reasoning = p.ParsesToolCalls(), p.ParsesReasoning()
	}
	return a
}

// takes reports whether the worker takes the capability name.
func (a accepts) takes(name string) bool {
	switch name {
	case discovery.CapStop:
		// vigil matches stop strings on its own text; without it, only
		// an engine that matches them itself takes them (SGLang's gRPC
		// server without a tokenizer refuses them).
		return a.tokenizer || a.engine[name]
	case discovery.CapChoice:
		return a.engine[name] || a.engine[discovery.CapRegex] // an escaped alternation
	case discovery.CapJSONObject:
		return a.engine[name] || a.engine[discovery.CapJSONSchema] // the schema {"type":"object"}
	case discovery.CapPromptTokenIDs:
		return a.tokenizer
	case discovery.CapChatTemplateKwargs:
		return a.chat
	case discovery.CapTools:
		return a.tools
	case discovery.CapReasoning:
		return a.reasoning
	case discovery.CapTokenize:
		return a.tokenize
	case discovery.CapEmbed:
		return a.embed
	case discovery.CapResume:
		return a.resume
	}
	return a.engine[name]
}

// capabilities is the set the worker publishes (discovery.MetaCaps).
func (a accepts) capabilities() discovery.Capabilities {
	if a.embedModel {
		return a.embedCapabilities()
	}
	var items []discovery.Capability
	seen := map[string]bool{}
	add := func(name string, v uint32) {
		if !seen[name] && a.takes(name) {
			seen[name] = true
			items = append(items, discovery.Capability{Name: name, Value: v})
		}
	}
	for name := range a.engine {
		add(name, 0)
	}
	for _, name := range []string{discovery.CapStop, discovery.CapChoice, discovery.CapJSONObject,
		discovery.CapPromptTokenIDs, discovery.CapChatTemplateKwargs, discovery.CapTokenize, discovery.CapTools, discovery.CapReasoning,
		discovery.CapResume} {
		add(name, 0)
	}
	if a.maxN > 1 {
		items = append(items, discovery.Capability{Name: discovery.CapN, Value: a.maxN})
	}
	for name, v := range a.logprobs {
		items = append(items, discovery.Capability{Name: name, Value: v})
	}
	c, err := discovery.NewCapabilities(items...)
	if err != nil { // an engine's malformed item: ParseCapabilities dropped those
		return discovery.LegacyCapabilities
	}
	return c
}

// embedCapabilities is the set of a worker of an embedding model, which
// takes no generation request: embed (when the adapter serves Embed) and
// tokenize; "none" without either.
func (a accepts) embedCapabilities() discovery.Capabilities {
	var items []discovery.Capability
	for _, name := range []string{discovery.CapEmbed, discovery.CapTokenize} {
		if a.takes(name) {
			items = append(items, discovery.Capability{Name: name})
		}
	}
	c, _ := discovery.NewCapabilities(items...) // known names cannot fail
	return c
}

// Capabilities returns what the worker publishes under discovery.MetaCaps
// for the engine attached and wrapped now: the engine's part of
// sdk.Worker.Accepts that vigil passes on (the legacy set for an adapter
// that lists none), stop strings when vigil has the model's tokenizer or
// the engine matches them, choice as an escaped regex, json_object as a
// schema, prompt_token_ids (return_prompt) with a tokenizer,
// chat_template_kwargs with a chat template, tokenize when the wrapped
// engine serves the Tokenize RPC ([Tokens]), the engine's logprobs and
// prompt_logprobs when vigil gives their token text ([LogprobTokens]:
// a tokenizer), resume when it continues other workers' streams
// ([Resumes]: a tokenizer), and n up to MaxN (at most --max-inflight) fanned out. A
// worker of an embedding model (its adapter's Accepts lists embed)
// publishes embed, when the adapter serves Embed (sdk.Embedder), and
// tokenize alone. The zero Capabilities before Attach.
func (s *Server) Capabilities() discovery.Capabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.engine == nil {
		return discovery.Capabilities{}
	}
	return s.accepts.capabilities()
}
