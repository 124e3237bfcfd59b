package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	sglangmock "github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/tokenizer"
)

// embeddingDim is the dimension of the mock's embedding model.
const embeddingDim = 16

// TestEmbeddings: through vigil route to an SGLang worker whose engine
// serves an embedding model (sglang-mock --embedding: is_generation
// false) and which has Llama 3's tokenizer, POST /v1/embeddings (404
// before) answers with the engine's vectors of the reference token ids:
// through the openai package's embeddings.create (its default base64, float
// asked, a list) and LangChain's OpenAIEmbeddings (embedQuery,
// embedDocuments). Chat for that model gets 400 naming it, never an
// engine error.
func TestEmbeddings(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := engineNamed(t, harness.SGLang.Name)
	dir, _ := fixtureTokenizer(t, "llama3")
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), Extra: []string{"--embedding", fmt.Sprint(embeddingDim)}})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--tokenizer-dir", dir}})
	v.waitLine("worker registered", 60*time.Second)
	base := "http://" + startRouter(t, c, svc, 1).HTTP
	model := e.servedModel
	// The engine's vector of a text: the mock's of the ids vigil's
	// tokenizer gives it, special tokens added.
	want := func(text string) []float32 {
		ids, err := tok.Encode(text, true)
		if err != nil {
			t.Fatal(err)
		}
		return sglangmock.Embedding(ids, embeddingDim)
	}
	hello, bye := want("Hello world"), want("Bye")

	t.Run("http", func(t *testing.T) {
		code, _, body := post(t, base+"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":"Hello world"}`, model))
		var got struct {
			Object string `json:"object"`
			Data   []struct {
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		ids, _ := tok.Encode("Hello world", true)
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Object != "list" || len(got.Data) != 1 ||
			!slices.Equal(got.Data[0].Embedding, hello) || got.Usage.PromptTokens != len(ids) {
			t.Fatalf("POST /v1/embeddings: %d %s\nwant 200, the engine's vector %v and %d prompt tokens", code, body, hello, len(ids))
		}
		code, _, body = post(t, base+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model))
		if code != 400 || !strings.Contains(body, `"param":"model"`) || !strings.Contains(body, "is an embedding model") {
			t.Errorf("chat for an embedding model: %d %s, want 400 naming the model", code, body)
		}
	})
	t.Run("parameters", func(t *testing.T) { checkEmbedParamRows(t, base, model, m) })
	t.Run("openai", func(t *testing.T) {
		var got struct {
			Default, Float []float32
			List           []struct {
				Index     int
				Embedding []float32
			}
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
				TotalTokens  int `json:"total_tokens"`
			}
			Model string
		}
		runApp(t, base, model, "openai-embeddings", &got)
		if !slices.Equal(got.Default, hello) || !slices.Equal(got.Float, hello) || got.Model != model {
			t.Errorf("openai embeddings.create: default %v, float %v, model %q; want %v both and %q", got.Default, got.Float, got.Model, hello, model)
		}
		if len(got.List) != 2 || got.List[0].Index != 0 || !slices.Equal(got.List[0].Embedding, hello) ||
			got.List[1].Index != 1 || !slices.Equal(got.List[1].Embedding, bye) || got.Usage.TotalTokens != got.Usage.PromptTokens || got.Usage.PromptTokens == 0 {
			t.Errorf("openai embeddings.create of a list: %+v, want index 0 %v and index 1 %v", got, hello, bye)
		}
	})
	t.Run("langchain", func(t *testing.T) {
		var got struct {
			Query     []float32
			Documents [][]float32
		}
		runApp(t, base, model, "langchain-embeddings", &got)
		if !slices.Equal(got.Query, hello) || len(got.Documents) != 2 || !slices.Equal(got.Documents[0], hello) || !slices.Equal(got.Documents[1], bye) {
			t.Errorf("LangChain OpenAIEmbeddings: %+v, want query %v and documents [%v %v]", got, hello, hello, bye)
		}
	})
}
