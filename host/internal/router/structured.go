package router

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// soParser reads one request field that can set a structured-output
// constraint: nil when its value asks for none (response_format text).
// key is the constraint's own name in errors (structured_outputs.regex).
type soParser func(param string, raw json.RawMessage) (so *workerv1.StructuredOutput, key string, aerr *apiError)

// soField is one such field of a request, in the order they are read.
type soField struct {
	param string
	raw   json.RawMessage
	parse soParser
}

// setStructuredOutput maps response_format, vLLM's guided_json,
// guided_regex, guided_choice, guided_grammar and structured_outputs onto
// req.structured_output: at most one constraint, else 400 naming the
// second. names.structured learns the field that set it, which a 400 for a
// worker that lacks it names.
func (c *request) setStructuredOutput(req *workerv1.GenerateRequest, names *fieldNames) *apiError {
	fields := []soField{
		{"response_format", c.ResponseFormat, parseResponseFormat},
		{"guided_json", c.GuidedJSON, func(p string, raw json.RawMessage) (*workerv1.StructuredOutput, string, *apiError) {
			return schemaSO(p, p, raw, true)
		}},
		{"guided_regex", c.GuidedRegex, stringSO(soRegex)},
		{"guided_choice", c.GuidedChoice, parseChoice},
		{"guided_grammar", c.GuidedGrammar, stringSO(soGrammar)},
		{"structured_outputs", c.StructuredOutputs, parseStructuredOutputs},
	}
	var first string
	for _, f := range fields {
		if isNull(f.raw) {
			continue
		}
		so, key, aerr := f.parse(f.param, f.raw)
		if aerr != nil {
			return aerr
		}
		if so == nil {
			continue
		}
		if first != "" {
			return badRequest(f.param, "%s: at most one structured-output constraint per request, and %s sets one already", key, first)
		}
		first, names.structured = key, f.param
		req.StructuredOutput = so
	}
	return nil
}

// soNeed is the capability a constraint needs of a worker.
func soNeed(so *workerv1.StructuredOutput) string {
	switch k := so.GetKind().(type) {
	case *workerv1.StructuredOutput_JsonObject:
		return discovery.CapJSONObject
	case *workerv1.StructuredOutput_JsonSchema:
		return discovery.CapJSONSchema
	case *workerv1.StructuredOutput_Regex:
		return discovery.CapRegex
	case *workerv1.StructuredOutput_Choice:
		return discovery.CapChoice
	case *workerv1.StructuredOutput_Grammar:
		return "grammar." + k.Grammar.GetDialect()
	case *workerv1.StructuredOutput_StructuralTag:
		return discovery.CapStructuralTag
	}
	return ""
}

// object reads raw as a JSON object, else 400 naming param.
func object(param string, raw json.RawMessage) (map[string]json.RawMessage, *apiError) {
	var m map[string]json.RawMessage
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, badRequest(param, "%s: want an object, got %s", param, clip(raw))
	}
	return m, nil
}

// parseResponseFormat reads OpenAI's response_format: {"type": "text"},
// {"type": "json_object"}, or {"type": "json_schema", "json_schema":
// {"name", "schema", "strict", "description"}}.
func parseResponseFormat(param string, raw json.RawMessage) (*workerv1.StructuredOutput, string, *apiError) {
	m, aerr := object(param, raw)
	if aerr != nil {
		return nil, "", aerr
	}
	var typ string
	if json.Unmarshal(m["type"], &typ) != nil {
		return nil, "", badRequest(param+".type", `%s.type: want "text", "json_object" or "json_schema"`, param)
	}
	for k := range m {
		if k != "type" && !(k == "json_schema" && typ == "json_schema") {
			return nil, "", badRequest(param+"."+k, "%s.%s: not a field of a response_format of type %q", param, k, typ)
		}
	}
	switch typ {
	case "text":
		return nil, "", nil
	case "json_object":
		return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonObject{JsonObject: true}}, param, nil
	case "json_schema":
		return parseJSONSchema(param+".json_schema", m["json_schema"], param)
	}
	return nil, "", badRequest(param+".type", `%s.type: want "text", "json_object" or "json_schema", got %q`, param, typ)
}

// parseJSONSchema reads response_format.json_schema.
func parseJSONSchema(param string, raw json.RawMessage, key string) (*workerv1.StructuredOutput, string, *apiError) {
	if isNull(raw) {
		return nil, "", badRequest(param, "%s: required with type json_schema", param)
	}
	m, aerr := object(param, raw)
	if aerr != nil {
		return nil, "", aerr
	}
	js := &workerv1.JsonSchema{}
	for k, v := range m {
		var err error
		want := "a string"
		switch k {
		case "name", "description":
			var s *string
			if err = json.Unmarshal(v, &s); err == nil && s != nil && k == "name" {
				js.Name = *s
			}
		case "strict":
			var b *bool
			err = json.Unmarshal(v, &b)
			js.Strict, want = b != nil && *b, "a boolean"
		case "schema":
		default:
			return nil, "", badRequest(param+"."+k, "%s.%s: not a field of json_schema (name, schema, strict, description)", param, k)
		}
		if err != nil {
			return nil, "", badRequest(param+"."+k, "%s.%s: want %s, got %s", param, k, want, clip(v))
		}
	}
	schema, aerr := schemaText(param+".schema", m["schema"], false)
	if aerr != nil {
		return nil, "", aerr
	}
	js.Schema = schema
	return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonSchema{JsonSchema: js}}, key, nil
}

// schemaSO is a JSON schema constraint from guided_json or
// structured_outputs.json: an object, or a string holding one.
func schemaSO(param, key string, raw json.RawMessage, asString bool) (*workerv1.StructuredOutput, string, *apiError) {
	schema, aerr := schemaText(param, raw, asString)
	if aerr != nil {
		return nil, "", aerr
	}
	return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonSchema{JsonSchema: &workerv1.JsonSchema{Schema: schema}}}, key, nil
}

// schemaText is a JSON schema as compact JSON text: an object, or with
// asString a JSON string holding one (vLLM's guided_json takes both).
func schemaText(param string, raw json.RawMessage, asString bool) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	want := "an object (a JSON schema)"
	if asString {
		want += " or a string holding one"
	}
	bad := badRequest(param, "%s: want %s, got %s", param, want, clip(raw))
	if isNull(raw) {
		return "", badRequest(param, "%s: required: want %s", param, want)
	}
	if asString && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", bad
		}
		raw = bytes.TrimSpace([]byte(s))
	}
	var buf bytes.Buffer
	if len(raw) == 0 || raw[0] != '{' || json.Compact(&buf, raw) != nil {
		return "", bad
	}
	return buf.String(), nil
}

// stringSO reads a non-empty string into the constraint mk returns.
func stringSO(mk func(string) *workerv1.StructuredOutput) soParser {
	return func(param string, raw json.RawMessage) (*workerv1.StructuredOutput, string, *apiError) {
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return nil, "", badRequest(param, "%s: want a non-empty string, got %s", param, clip(raw))
		}
		return mk(s), param, nil
	}
}

func soRegex(s string) *workerv1.StructuredOutput {
	return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Regex{Regex: s}}
}

func soStructuralTag(s string) *workerv1.StructuredOutput {
	return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_StructuralTag{StructuralTag: s}}
}

// grammarDialect is the dialect of a grammar's text, as vLLM tells them
// apart (grammar_is_likely_lark): "ebnf" when a line, comments (# and //)
// left out, defines a rule with ::=, else "lark".
func grammarDialect(text string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		if strings.Contains(line, "::=") {
			return "ebnf"
		}
	}
	return "lark"
}

func soGrammar(text string) *workerv1.StructuredOutput {
	return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Grammar{Grammar: &workerv1.Grammar{Dialect: grammarDialect(text), Text: text}}}
}

// parseChoice reads guided_choice: a non-empty array of strings.
func parseChoice(param string, raw json.RawMessage) (*workerv1.StructuredOutput, string, *apiError) {
	var choices []string
	if json.Unmarshal(raw, &choices) != nil || len(choices) == 0 {
		return nil, "", badRequest(param, "%s: want a non-empty array of strings, got %s", param, clip(raw))
	}
	return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Choice{Choice: &workerv1.Choice{Choices: choices}}}, param, nil
}

// parseStructuredOutputs reads vLLM's structured_outputs object: one of
// json, regex, choice, grammar, json_object (true) and structural_tag.
func parseStructuredOutputs(param string, raw json.RawMessage) (*workerv1.StructuredOutput, string, *apiError) {
	m, aerr := object(param, raw)
	if aerr != nil {
		return nil, "", aerr
	}
	var so *workerv1.StructuredOutput
	var first string
	for _, k := range []string{"json", "regex", "choice", "grammar", "json_object", "structural_tag"} {
		v, ok := m[k]
		delete(m, k)
		if !ok || isNull(v) {
			continue
		}
		got, key, aerr := structuredOutputsKey(param+"."+k, v)
		if aerr != nil {
			return nil, "", aerr
		}
		if got == nil {
			continue
		}
		if so != nil {
			return nil, "", badRequest(param, "%s: at most one structured-output constraint per request, and %s sets one already", key, first)
		}
		so, first = got, key
	}
	for k, v := range m {
		if !isNull(v) {
			return nil, "", badRequest(param+"."+k, "%s.%s: vigil takes json, regex, choice, grammar, json_object and structural_tag; omit it or send null", param, k)
		}
	}
	return so, first, nil
}

// structuredOutputsKey reads one key of structured_outputs.
func structuredOutputsKey(param string, raw json.RawMessage) (*workerv1.StructuredOutput, string, *apiError) {
	switch param[strings.LastIndexByte(param, '.')+1:] {
	case "json":
		return schemaSO(param, param, raw, true)
	case "regex":
		return stringSO(soRegex)(param, raw)
	case "choice":
		return parseChoice(param, raw)
	case "grammar":
		return stringSO(soGrammar)(param, raw)
	case "json_object":
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return nil, "", badRequest(param, "%s: want a boolean, got %s", param, clip(raw))
		}
		if !b {
			return nil, "", nil
		}
		return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonObject{JsonObject: true}}, param, nil
	}
	// structural_tag: JSON text as vLLM takes it, or the object itself.
	raw = bytes.TrimSpace(raw)
	if raw[0] == '{' {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			return soStructuralTag(buf.String()), param, nil
		}
	}
	return stringSO(soStructuralTag)(param, raw)
}
