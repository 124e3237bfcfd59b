package mock

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// client serves a mock engine with cfg on loopback and dials it.
func client(t *testing.T, cfg Config) (*Engine, trtllmpb.TrtllmServiceClient) {
	t.Helper()
	e := New(cfg)
	addr := enginemock.Loopback(t, e.Engine, "")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return e, trtllmpb.NewTrtllmServiceClient(conn)
}

// generate runs req to its end and returns its messages and error.
func generate(t *testing.T, c trtllmpb.TrtllmServiceClient, req *trtllmpb.GenerateRequest) ([]*trtllmpb.GenerateResponse, error) {
	t.Helper()
	s, err := c.Generate(t.Context(), req)
	if err != nil {
		return nil, err
	}
	var msgs []*trtllmpb.GenerateResponse
	for {
		m, err := s.Recv()
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

// TestEmbeddingBiasLength: an embedding_bias whose length is not
// vocab_size is INVALID_ARGUMENT in the SMG adapter's words; vocab_size's
// length is taken, and any length when the vocabulary is unknown (0).
func TestEmbeddingBiasLength(t *testing.T) {
	t.Parallel()
	_, c := client(t, Config{VocabSize: 8})
	req := func(n int) *trtllmpb.GenerateRequest {
		return &trtllmpb.GenerateRequest{RequestId: "b", Tokenized: &trtllmpb.TokenizedInput{InputTokenIds: []uint32{1}},
			MaxTokens: 1, EmbeddingBias: make([]float32, n)}
	}
	_, err := generate(t, c, req(7))
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "embedding_bias length (7) must match vocab_size (8)" {
		t.Errorf("7 biases for a vocabulary of 8: %v, want INVALID_ARGUMENT naming embedding_bias", err)
	}
	if _, err := generate(t, c, req(8)); err != nil {
		t.Errorf("8 biases for a vocabulary of 8: %v, want nil", err)
	}
	info, err := c.GetModelInfo(t.Context(), &trtllmpb.GetModelInfoRequest{})
	if err != nil || info.GetVocabSize() != 8 {
		t.Errorf("GetModelInfo = %v, %v; want vocab_size 8", info, err)
	}
	_, unknown := client(t, Config{VocabSize: -1})
	if _, err := generate(t, unknown, req(3)); err != nil {
		t.Errorf("3 biases for an unknown vocabulary: %v, want nil", err)
	}
}

// TestRecordsRequest: GET /state's last_request is the last request as
// protojson, refused ones and empty guides included; cached_tokens is on
// every message, at most the prompt's length.
func TestRecordsRequest(t *testing.T) {
	t.Parallel()
	e, c := client(t, Config{CachedTokens: 5})
	rp := float32(1.1)
	req := &trtllmpb.GenerateRequest{RequestId: "r", Tokenized: &trtllmpb.TokenizedInput{InputTokenIds: []uint32{1, 2, 3}},
		SamplingConfig: &trtllmpb.SamplingConfig{RepetitionPenalty: &rp}, MaxTokens: 2, Streaming: true,
		GuidedDecoding: &trtllmpb.GuidedDecodingParams{GuideType: trtllmpb.GuidedDecodingParams_GUIDE_TYPE_REGEX}}
	msgs, err := generate(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if n := m.GetChunk().GetCachedTokens() + m.GetComplete().GetCachedTokens(); n != 3 {
			t.Errorf("message %v: cached_tokens %d, want 3 (5 configured, capped at the prompt)", m, n)
		}
	}
	got := &trtllmpb.GenerateRequest{}
	if err := protojson.Unmarshal(e.State().LastRequest, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(req, got, protocmp.Transform()); diff != "" {
		t.Errorf("last_request (-sent +recorded):\n%s", diff)
	}
	if _, err := generate(t, c, &trtllmpb.GenerateRequest{RequestId: "refused"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no max_tokens: %v, want INVALID_ARGUMENT", err)
	}
	raw, _ := json.Marshal(e.State())
	if !strings.Contains(string(raw), `"last_request":{"requestId":"refused"}`) {
		t.Errorf("state after a refused request: %s, want its last_request", raw)
	}
}
