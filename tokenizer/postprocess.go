package tokenizer

// Post-processors (tokenizer.json's post_processor), for one sequence, as
// the Rust library's processors/ do: TemplateProcessing's single template,
// Bert's and Roberta's [cls] $A [sep], ByteLevel (offsets only: ids
// unchanged) and Sequence (each in turn). Without addSpecial a sequence's
// ids are left as they are.

import (
	"encoding/json"
	"fmt"
)

func init() {
	postProcessorTypes["TemplateProcessing"] = newTemplate
	postProcessorTypes["ByteLevel"] = func(json.RawMessage, string, vocab) (postProcessor, error) { return around{}, nil }
	postProcessorTypes["BertProcessing"] = newClsSep
	postProcessorTypes["RobertaProcessing"] = newClsSep
	postProcessorTypes["Sequence"] = newPostSequence
}

// around puts prefix before a sequence and suffix after it.
type around struct{ prefix, suffix []uint32 }

func (a around) process(ids []uint32, addSpecial bool) []uint32 {
	if !addSpecial || len(a.prefix)+len(a.suffix) == 0 {
		return ids
	}
	out := make([]uint32, 0, len(a.prefix)+len(ids)+len(a.suffix))
	out = append(out, a.prefix...)
	out = append(out, ids...)
	return append(out, a.suffix...)
}

type templateJSON struct {
	Single []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct {
			ID string `json:"id"`
		} `json:"Sequence"`
	} `json:"single"`
	SpecialTokens map[string]struct {
		IDs []uint32 `json:"ids"`
	} `json:"special_tokens"`
}

// newTemplate reads TemplateProcessing's single template: special tokens
// (by their special_tokens entry) around one $A.
func newTemplate(obj json.RawMessage, path string, _ vocab) (postProcessor, error) {
	var j templateJSON
	if err := json.Unmarshal(obj, &j); err != nil {
		return nil, &FieldError{Field: path, Reason: "malformed: " + err.Error()}
	}
	var a around
	seen := false
	for i, e := range j.Single {
		p := fmt.Sprintf("%s.single[%d]", path, i)
		switch {
		case e.Sequence != nil && e.SpecialToken == nil:
			if e.Sequence.ID != "A" || seen {
				return nil, &FieldError{Field: p + ".Sequence.id", Value: fmt.Sprintf("%q", e.Sequence.ID), Reason: "a single sequence's template has one $A"}
			}
			seen = true
		case e.SpecialToken != nil && e.Sequence == nil:
			st, ok := j.SpecialTokens[e.SpecialToken.ID]
			if !ok {
				return nil, &FieldError{Field: p + ".SpecialToken.id", Value: fmt.Sprintf("%q", e.SpecialToken.ID), Reason: "not in special_tokens"}
			}
			if seen {
				a.suffix = append(a.suffix, st.IDs...)
			} else {
				a.prefix = append(a.prefix, st.IDs...)
			}
		default:
			return nil, &FieldError{Field: p, Reason: "a SpecialToken or a Sequence expected"}
		}
	}
	if !seen {
		return nil, &FieldError{Field: path + ".single", Reason: "no $A sequence"}
	}
	return a, nil
}

// newClsSep reads Bert's and Roberta's cls and sep, each [token, id].
func newClsSep(obj json.RawMessage, path string, _ vocab) (postProcessor, error) {
	var j struct {
		Cls []json.RawMessage `json:"cls"`
		Sep []json.RawMessage `json:"sep"`
	}
	if err := json.Unmarshal(obj, &j); err != nil {
		return nil, &FieldError{Field: path, Reason: "malformed: " + err.Error()}
	}
	cls, err := pairID(j.Cls, path+".cls")
	if err != nil {
		return nil, err
	}
	sep, err := pairID(j.Sep, path+".sep")
	if err != nil {
		return nil, err
	}
	return around{prefix: []uint32{cls}, suffix: []uint32{sep}}, nil
}

func pairID(pair []json.RawMessage, path string) (uint32, error) {
	var tok string
	var id uint32
	if len(pair) != 2 || json.Unmarshal(pair[0], &tok) != nil || json.Unmarshal(pair[1], &id) != nil {
		return 0, &FieldError{Field: path, Reason: "a [token, id] pair expected"}
	}
	return id, nil
}

// postSequence runs its processors in turn.
type postSequence []postProcessor

func (s postSequence) process(ids []uint32, addSpecial bool) []uint32 {
	for _, p := range s {
		ids = p.process(ids, addSpecial)
	}
	return ids
}

func newPostSequence(obj json.RawMessage, path string, v vocab) (postProcessor, error) {
	var j struct {
		Processors []json.RawMessage `json:"processors"`
	}
	if err := json.Unmarshal(obj, &j); err != nil {
		return nil, &FieldError{Field: path, Reason: "malformed: " + err.Error()}
	}
	var s postSequence
	for i, p := range j.Processors {
		pp, err := buildPostProcessor(p, fmt.Sprintf("%s.processors[%d]", path, i), v)
		if err != nil {
			return nil, err
		}
		if pp != nil {
			s = append(s, pp)
		}
	}
	return s, nil
}

// rebuiltClasses are the tokenizer classes whose post-processor
// transformers v4 rebuilds at load from add_bos_token and add_eos_token
// (update_post_processor, called from __init__), with each class's
// defaults, read in src/transformers/models/: llama/tokenization_llama_fast.py
// (LlamaTokenizerFast), code_llama/tokenization_code_llama_fast.py,
// gemma/tokenization_gemma_fast.py, cohere/tokenization_cohere_fast.py and
// gpt_neox/tokenization_gpt_neox_fast.py (since v4.40). AutoTokenizer loads
// the Fast class for the slow name too. Each raises ValueError when a flag
// is on and its token is None. transformers v5 differs (any class, when the
// configuration names a flag): docs/engines.md says so.
var rebuiltClasses = map[string]struct {
	addBOS, addEOS bool
	bos, eos       string
}{
	"LlamaTokenizer":     {addBOS: true, bos: "<s>", eos: "</s>"},
	"CodeLlamaTokenizer": {addBOS: true, bos: "<s>", eos: "</s>"},
	"GemmaTokenizer":     {addBOS: true, bos: "<bos>", eos: "<eos>"},
	"CohereTokenizer":    {addBOS: true, bos: "<BOS_TOKEN>", eos: "<|END_OF_TURN_TOKEN|>"},
	"GPTNeoXTokenizer":   {bos: "<|endoftext|>", eos: "<|endoftext|>"},
}

// configPostProcessor is the post-processor transformers builds for cfg's
// tokenizer class, or ok false when it keeps tokenizer.json's.
func configPostProcessor(cfg *tokenizerConfig, v vocab) (p postProcessor, ok bool, err error) {
	class, found := rebuiltClasses[trimFast(cfg.TokenizerClass)]
	if !found {
		return nil, false, nil
	}
	addBOS, addEOS := class.addBOS, class.addEOS
	if cfg.AddBOS != nil {
		addBOS = *cfg.AddBOS
	}
	if cfg.AddEOS != nil {
		addEOS = *cfg.AddEOS
	}
	var a around
	for _, s := range []struct {
		add   bool
		field string
		tok   *string
		def   string
		ids   *[]uint32
	}{{addBOS, "bos_token", cfg.BOS, class.bos, &a.prefix}, {addEOS, "eos_token", cfg.EOS, class.eos, &a.suffix}} {
		if !s.add {
			continue
		}
		tok := s.def
		if s.tok != nil {
			tok = *s.tok
		}
		if tok == "" {
			return nil, false, fmt.Errorf("%s: %s is null but add_%s is true (transformers raises ValueError at load)", TokenizerConfigFile, s.field, s.field)
		}
		id, found := v.id(tok)
		if !found {
			return nil, false, fmt.Errorf("%s: %s %q: add_%s is true but the token is not in the vocabulary", TokenizerConfigFile, s.field, tok, s.field)
		}
		*s.ids = []uint32{id}
	}
	return a, true, nil
}

func trimFast(class string) string {
	if len(class) > 4 && class[len(class)-4:] == "Fast" {
		return class[:len(class)-4]
	}
	return class
}
