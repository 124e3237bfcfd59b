package router

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// endpointEmbeddings is OpenAI's embeddings API.
const endpointEmbeddings = "/v1/embeddings"

// MaxEmbeddingInputs is the most inputs one embeddings request may list,
// as OpenAI's API allows.
const MaxEmbeddingInputs = 2048

// embeddingsFields are the fields of OpenAI's EmbeddingCreateParams that
// vigil takes; dimensions only unset (no engine's gRPC embedding
// truncates). Any other field is refused.
var embeddingsFields = map[string]bool{"model": true, "input": true, "encoding_format": true, "dimensions": true, "user": true}

// embeddingsRequest is the body of POST /v1/embeddings.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     json.RawMessage `json:"dimensions"`
	User           *string         `json:"user"`
}

// embeddingJSON is one item of the response's data: the vector as floats,
// or base64 of its little-endian float32s.
type embeddingJSON struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingsResponse struct {
	Object string          `json:"object"`
	Data   []embeddingJSON `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingsUsage `json:"usage"`
}

type embeddingsUsage struct {
	PromptTokens uint32 `json:"prompt_tokens"`
	TotalTokens  uint32 `json:"total_tokens"`
}

// embeddings answers POST /v1/embeddings: one worker Embed per input, at
// most batchParallel at once, the data in input order.
func (h *httpHandler) embeddings(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.proxy.refused(RefusedInvalid)
		methodNotAllowed(w, r, http.MethodPost)
		return
	}
	id := "embd-" + newRequestID()
	c, reqs, aerr := h.parseEmbeddings(w, r)
	if aerr != nil {
		h.proxy.refused(badRefusal(aerr))
		h.fail(w, r, id, aerr)
		return
	}
	for i, req := range reqs {
		req.RequestId = id
		if len(reqs) > 1 {
			req.RequestId = id + "-" + strconv.Itoa(i)
		}
	}
	resps, i, err := h.embedAll(r.Context(), reqs)
	if err != nil {
		h.fail(w, r, id, embedError(err, i, len(reqs) > 1))
		return
	}
	out := embeddingsResponse{Object: "list", Data: make([]embeddingJSON, len(resps)), Model: c.Model}
	base64Format := c.EncodingFormat != nil && *c.EncodingFormat == "base64"
	for i, resp := range resps {
		out.Data[i] = embeddingJSON{Object: "embedding", Index: i, Embedding: encodeEmbedding(resp.GetEmbedding(), base64Format)}
		out.Usage.PromptTokens += resp.GetPromptTokens()
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	writeJSON(w, http.StatusOK, out)
}

// encodeEmbedding is v as OpenAI sends it: floats, or (base64) the
// base64 of its float32s, little-endian.
func encodeEmbedding(v []float32, base64Format bool) any {
	if !base64Format {
		return v
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// embedAll runs one Embed per request, batchParallel at a time; the
// first failure (and its index) cancels the rest.
func (h *httpHandler) embedAll(ctx context.Context, reqs []*workerv1.EmbedRequest) ([]*workerv1.EmbedResponse, int, error) {
	if len(reqs) == 1 {
		resp, err := h.proxy.Embed(ctx, reqs[0])
		return []*workerv1.EmbedResponse{resp}, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resps := make([]*workerv1.EmbedResponse, len(reqs))
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		firstAt  int
	)
	slots := make(chan struct{}, batchParallel)
	for i, req := range reqs {
		wg.Go(func() {
			var err error
			select {
			case slots <- struct{}{}:
				resps[i], err = h.proxy.Embed(ctx, req)
				<-slots
			case <-ctx.Done():
				err = status.FromContextError(ctx.Err()).Err()
			}
			if err != nil {
				once.Do(func() { firstErr, firstAt = err, i; cancel() })
			}
		})
	}
	wg.Wait()
	return resps, firstAt, firstErr
}

// parseEmbeddings reads and checks a request's body, in a fixed order,
// and maps each input to a worker request.
func (h *httpHandler) parseEmbeddings(w http.ResponseWriter, r *http.Request) (*embeddingsRequest, []*workerv1.EmbedRequest, *apiError) {
	fields, body, aerr := h.readBody(w, r)
	if aerr != nil {
		return nil, nil, aerr
	}
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if !embeddingsFields[f] {
			return nil, nil, badRequest(f, "Unrecognized request argument supplied: %s", f)
		}
	}
	var c embeddingsRequest
	if aerr := decodeBody(body, &c); aerr != nil {
		return nil, nil, aerr
	}
	if f := c.EncodingFormat; f != nil && *f != "float" && *f != "base64" {
		return nil, nil, badRequest("encoding_format", "encoding_format: %q: want \"float\" or \"base64\"", clipStr(*f))
	}
	if raw := bytes.TrimSpace(c.Dimensions); !isNull(raw) {
		return nil, nil, badRequest("dimensions", "dimensions: vigil cannot honour dimensions = %s: the workers' engines "+
			"(SGLang's gRPC Embed) cannot truncate an embedding; leave dimensions unset for the model's own", clip(raw))
	}
	inputs, aerr := parseEmbeddingInput(c.Input)
	if aerr != nil {
		return nil, nil, aerr
	}
	reqs := make([]*workerv1.EmbedRequest, len(inputs))
	for i, in := range inputs {
		reqs[i] = &workerv1.EmbedRequest{Model: c.Model}
		if in.ids != nil {
			reqs[i].Input = &workerv1.EmbedRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: in.ids}}
		} else {
			reqs[i].Input = &workerv1.EmbedRequest_Text{Text: in.text}
		}
	}
	return &c, reqs, nil
}

// embedInput is one input: text, or token ids when ids is not nil.
type embedInput struct {
	text string
	ids  []uint32
}

// parseEmbeddingInput reads input as OpenAI takes it: a string, an array
// of strings, an array of token ids, or an array of such arrays; none
// empty, at most MaxEmbeddingInputs.
func parseEmbeddingInput(raw json.RawMessage) ([]embedInput, *apiError) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, badRequest("input", "input: required: a string, an array of strings, an array of token ids or an array of such arrays")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return nil, badRequest("input", "input: must not be empty")
		}
		return []embedInput{{text: text}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("input", "input: want a string, an array of strings, an array of token ids or an array of such arrays, got %s", clip(raw))
	}
	switch {
	case len(items) == 0:
		return nil, badRequest("input", "input: must not be an empty array")
	case len(items) > MaxEmbeddingInputs:
		return nil, badRequest("input", "input: %d inputs, more than the %d one request may list", len(items), MaxEmbeddingInputs)
	}
	if ids, ok := tokenIDs(raw); ok {
		return []embedInput{{ids: ids}}, nil
	}
	inputs := make([]embedInput, len(items))
	for i, item := range items {
		if json.Unmarshal(item, &inputs[i].text) == nil {
			if inputs[i].text == "" {
				return nil, badRequest("input", "input[%d]: must not be empty", i)
			}
			continue
		}
		ids, ok := tokenIDs(item)
		switch {
		case !ok:
			return nil, badRequest("input", "input[%d]: want a string or an array of token ids (integers from 0), got %s", i, clip(item))
		case len(ids) == 0:
			return nil, badRequest("input", "input[%d]: must not be an empty array", i)
		}
		inputs[i].ids = ids
	}
	return inputs, nil
}

// tokenIDs reads raw as an array of token ids: integers from 0 to
// MaxUint32.
func tokenIDs(raw json.RawMessage) ([]uint32, bool) {
	var nums []float64
	if json.Unmarshal(raw, &nums) != nil {
		return nil, false
	}
	ids := make([]uint32, len(nums))
	for i, n := range nums {
		if n < 0 || n > math.MaxUint32 || n != math.Trunc(n) {
			return nil, false
		}
		ids[i] = uint32(n)
	}
	return ids, true
}

// embedError is the OpenAI error of a failed Embed, of input i (named
// when the request listed several): a worker's refusal of its input names
// input, one over the model's length gives OpenAI's words, the rest as
// fromStatus.
func embedError(err error, i int, many bool) *apiError {
	at := "input"
	if many {
		at = "input[" + strconv.Itoa(i) + "]"
	}
	st := status.Convert(err)
	if st.Code() == codes.InvalidArgument {
		if e := embedLengthError(st, at); e != nil {
			return e
		}
		msg := strings.TrimPrefix(st.Message(), "invalid argument: ")
		for _, f := range []string{"input.text", "input.token_ids", "input"} {
			if rest, ok := strings.CutPrefix(msg, f+":"); ok {
				return badRequest("input", "%s:%s", at, clean(rest))
			}
		}
	}
	return fromStatus(err, fieldNames{prompt: "input", maxTokens: "input"})
}

// embedLengthError is OpenAI's error for an input over the model's
// length, from the worker's ErrorInfo; nil for other statuses.
func embedLengthError(st *status.Status, at string) *apiError {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetReason() != workerapi.ReasonContextLength || info.GetDomain() != workerapi.ErrorDomain {
			continue
		}
		md := info.GetMetadata()
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "input", code: "context_length_exceeded",
			msg: "This model's maximum context length is " + md[workerapi.MetaMaxModelLen] + " tokens; " + at + " has " +
				md[workerapi.MetaPromptTokens] + " tokens, and an input must be shorter than the maximum."}
	}
	return nil
}
