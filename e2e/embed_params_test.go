package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// embedParamRow is one row of the embeddings parameter table in
// docs/router.md: a parameter of OpenAI's EmbeddingCreateParams, what vigil
// does with it, and what reaches SGLang's Embed (the only engine whose gRPC
// API serves embeddings), as paramRow's cells: "path" or "path=JSON" of the
// engine's request, "worker" (vigil does it, 200) or "400".
type embedParamRow struct {
	param, value, vigil, sglang string
}

// embedParamTable is the embeddings parameter table: every key of the
// pinned openai package's EmbeddingCreateParams. The SGLang cells hold
// with --tokenizer-dir (the worker tokenizes a text input).
var embedParamTable = []embedParamRow{
	{"input", "", "a string, token ids, or a list of either (up to 2048: one Embed per input, in order); none empty", "inputIds"},
	{"model", "", "picks the workers of an embedding model (they list the capability `embed`); another model's get 400 naming it", "worker"},
	{"encoding_format", `"base64"`, "`float` (the default) or `base64` (little-endian float32s, the `openai` package's default)", "worker"},
	{"dimensions", "8", "no engine's gRPC embedding truncates: only unset", "400"},
	{"user", `"u1"`, "accepted, not used", "worker"},
}

// embedParamTableMarkdown is the table as docs/router.md holds it.
func embedParamTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| parameter | vigil | SGLang |\n|---|---|---|\n")
	for _, r := range embedParamTable {
		cell := r.sglang
		switch cell {
		case "worker":
			cell = "vigil"
		case "400":
		default:
			path, _, _ := strings.Cut(cell, "=")
			cell = "`" + path + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.param, r.vigil, cell)
	}
	return b.String()
}

const (
	embedTableBegin = "<!-- embeddings parameter table: written by e2e TestEmbeddingsParameterTable (VIGIL_UPDATE_DOCS=1) -->\n"
	embedTableEnd   = "<!-- end of embeddings parameter table -->\n"
)

// TestEmbeddingsParameterTable: the embeddings table in docs/router.md
// has every key of the pinned openai package's EmbeddingCreateParams and
// is the one embedParamTable writes. TestEmbeddings checks each row against
// SGLang's mock through vigil route.
func TestEmbeddingsParameterTable(t *testing.T) {
	t.Parallel()
	for _, k := range openAIKeys(t, "resources/embeddings.d.ts", "EmbeddingCreateParams") {
		if !slices.ContainsFunc(embedParamTable, func(r embedParamRow) bool { return r.param == k }) {
			t.Errorf("openai's EmbeddingCreateParams has %s, which the embeddings parameter table does not have", k)
		}
	}
	doc := readFile(t, routerDoc)
	before, rest, ok1 := strings.Cut(doc, embedTableBegin)
	_, after, ok2 := strings.Cut(rest, embedTableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no embeddings parameter table markers", routerDoc)
	}
	want := before + embedTableBegin + embedParamTableMarkdown() + embedTableEnd + after
	if os.Getenv("VIGIL_UPDATE_DOCS") != "" {
		if err := os.WriteFile(routerDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Errorf("%s's embeddings parameter table is not embedParamTable's: run VIGIL_UPDATE_DOCS=1 go test -run TestEmbeddingsParameterTable ./e2e/", routerDoc)
	}
}

// checkEmbedParamRows sends each row's parameter to base's model (an
// SGLang embedding model behind a worker with a tokenizer) and checks what
// its cell says.
func checkEmbedParamRows(t *testing.T, base, model string, m *mock) {
	t.Helper()
	for _, r := range embedParamTable {
		checkCell(t, base+"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":"Hi"`, model), "", r.param, r.value, r.sglang, m)
	}
}
