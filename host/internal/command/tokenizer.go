package command

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/outparse"
	"github.com/vigilhq/vigil/host/internal/textgen"
	"github.com/vigilhq/vigil/host/internal/tokenizer"
	"github.com/vigilhq/vigil/sdk"
)

// loadTokenizer loads --tokenizer-dir (with --chat-template), nil without
// it; an error names the flag at fault and exits 78.
func loadTokenizer(cfg runConfig) (*tokenizer.Tokenizer, error) {
	if cfg.chatTemplate != "" {
		if fi, err := os.Stat(cfg.chatTemplate); err != nil {
			return nil, usageErrorf("--chat-template %q: want a readable Jinja template file: %v", cfg.chatTemplate, err)
		} else if fi.IsDir() {
			return nil, usageErrorf("--chat-template %q: is a directory; want a Jinja template file", cfg.chatTemplate)
		}
		// Now, not when a tokenizer comes from the engine's model path
		// later: a template that does not compile is the flag's error.
		if err := tokenizer.CheckChatTemplate(cfg.chatTemplate); err != nil {
			return nil, usageErrorf("--chat-template %q: %v", cfg.chatTemplate, err)
		}
	}
	if cfg.tokenizerDir == "" {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(cfg.tokenizerDir, tokenizer.TokenizerFile)); err != nil {
		return nil, usageErrorf("--tokenizer-dir %q: want a directory holding the model's %s: %v", cfg.tokenizerDir, tokenizer.TokenizerFile, err)
	}
	tok, err := tokenizer.Load(cfg.tokenizerDir, cfg.chatTemplate)
	if err != nil {
		if cfg.chatTemplate != "" && strings.Contains(err.Error(), cfg.chatTemplate) {
			return nil, usageErrorf("--chat-template %q: %v", cfg.chatTemplate, err)
		}
		return nil, usageErrorf("--tokenizer-dir %q: %v", cfg.tokenizerDir, err)
	}
	return tok, nil
}

// withTokenizer adds to --dry-run's output what the tokenizer flags
// resolved to.
func withTokenizer(r map[string]any, cfg runConfig, tok *tokenizer.Tokenizer) map[string]any {
	switch {
	case tok != nil:
		r["tokenizer"] = "loaded from " + cfg.tokenizerDir
		r["chat-template-loaded"] = tok.HasChatTemplate()
	default:
		r["tokenizer"] = "the model path the engine reports, when it is a local directory holding " + tokenizer.TokenizerFile
	}
	return r
}

// workerTokenizer is the supervisor's Tokenizer hook: it has the endpoint
// wrap its engine with vigil's tokenization (textgen) by tok, or else by
// the tokenizer in the model path the engine reports when that is a local
// directory holding tokenizer.json (a failure there is a warning: the
// worker runs as without one).
func workerTokenizer(cfg runConfig, tok *tokenizer.Tokenizer, wrap func(func(sdk.Generator) sdk.Generator), log hclog.Logger) func(sdk.Worker) (bool, bool) {
	return func(w sdk.Worker) (bool, bool) {
		if tok == nil {
			tok = modelDirTokenizer(w.ModelID, cfg.chatTemplate, log)
		}
		if tok == nil {
			if cfg.chatTemplate != "" {
				log.Warn("--chat-template is not used: no tokenizer is loaded (give --tokenizer-dir)", "chat_template", cfg.chatTemplate)
			}
			return false, false
		}
		t, maxLen := textgen.HF(tok), w.MaxModelLen
		reasoning, toolCall := chooseParsers(cfg, w, tok, log)
		wrap(func(g sdk.Generator) sdk.Generator { return textgen.New(g, t, maxLen).WithParsers(reasoning, toolCall) })
		return true, tok.HasChatTemplate()
	}
}

// modelDirTokenizer loads the tokenizer of the model at path when path is a
// local directory holding tokenizer.json; nil otherwise.
func modelDirTokenizer(path, chatTemplate string, log hclog.Logger) *tokenizer.Tokenizer {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(path, tokenizer.TokenizerFile)); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("cannot read the engine's model path for a tokenizer; text prompts go to the engine as text", "model_id", path, "error", err)
		}
		return nil
	}
	tok, err := tokenizer.Load(path, chatTemplate)
	if err != nil {
		log.Warn("the engine's model path holds a tokenizer that does not load; running without one (give --tokenizer-dir)", "model_id", path, "error", err)
		return nil
	}
	log.Info("tokenizer loaded from the engine's model path", "model_id", path, "chat_template", tok.HasChatTemplate())
	return tok
}

// chooseParsers picks the reasoning and tool-call parsers: the flag's,
// else the engine's where outparse has it, else the chat template's
// (outparse.Detect); none without a chat template.
func chooseParsers(cfg runConfig, w sdk.Worker, tok *tokenizer.Tokenizer, log hclog.Logger) (reasoning, toolCall string) {
	if !tok.HasChatTemplate() {
		return "", ""
	}
	detR, detT := outparse.Detect(tok.TemplateSource())
	pick := func(flag, engine, detected string, tool bool) (string, string) {
		switch {
		case flag != "":
			return flag, "flag"
		case engine != "" && outparse.Check("", engine, tool) == nil:
			return engine, "engine"
		case engine != "":
			log.Warn("the engine's parser is not one vigil has; told from the chat template instead", "parser", engine)
		}
		if detected == "" {
			return outparse.None, "none found"
		}
		return detected, "chat template"
	}
	reasoning, rFrom := pick(cfg.reasoningParser, w.ReasoningParser, detR, false)
	toolCall, tFrom := pick(cfg.toolCallParser, w.ToolCallParser, detT, true)
	log.Info("output parsers", "reasoning_parser", reasoning, "reasoning_parser_from", rFrom, "tool_call_parser", toolCall, "tool_call_parser_from", tFrom)
	return reasoning, toolCall
}
