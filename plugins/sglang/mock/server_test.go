package mock_test

import (
	"encoding/json"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// client serves a mock engine of cfg on loopback and dials it.
func client(t *testing.T, cfg mock.Config) (*mock.Engine, sglangpb.SglangServiceClient) {
	t.Helper()
	e := mock.New(cfg)
	conn, err := grpc.NewClient(enginemock.Loopback(t, e.Engine, ""), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return e, sglangpb.NewSglangServiceClient(conn)
}

// generate runs one request to its end, returning its error.
func generate(t *testing.T, c sglangpb.SglangServiceClient, req *sglangpb.GenerateRequest) error {
	t.Helper()
	stream, err := c.Generate(t.Context(), req)
	for err == nil {
		_, err = stream.Recv()
	}
	if err == io.EOF {
		return nil
	}
	return err
}

// TestStopRefused: as SGLang's gRPC server without a tokenizer does, the
// mock refuses stop strings with INVALID_ARGUMENT in SGLang's words, in
// either layout, and records the request all the same.
func TestStopRefused(t *testing.T) {
	for _, layout := range []mock.Layout{mock.LayoutReleased, mock.LayoutNew} {
		e, c := client(t, mock.Config{Layout: layout})
		req := &sglangpb.GenerateRequest{InputIds: []int32{1}, SamplingParams: &sglangpb.SamplingParams{Stop: []string{"\n", "it's", `say "it's"`}}}
		err := generate(t, c, req)
		want := `stop=['\n', "it's", 'say "it\'s"'] is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).`
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
			t.Errorf("%s: Generate(stop) = %v, want INVALID_ARGUMENT %q", layout, err, want)
		}
		var got sglangpb.GenerateRequest
		if err := protojson.Unmarshal(e.State().LastRequest, &got); err != nil || !proto.Equal(&got, req) {
			t.Errorf("%s: last_request %s (%v), want the request refused", layout, e.State().LastRequest, err)
		}
	}
}

// TestRecordsEveryField: the record is the request as it came, a field the
// released layout lacks included, so a test sees what a real server would
// have skipped; GET /state carries it.
func TestRecordsEveryField(t *testing.T) {
	e, c := client(t, mock.Config{})
	seed, n := int64(4), int32(2)
	req := &sglangpb.GenerateRequest{InputIds: []int32{1}, SamplingParams: &sglangpb.SamplingParams{Seed: &seed, MaxNewTokens: &n}}
	if err := generate(t, c, req); err != nil {
		t.Fatal(err)
	}
	var state struct {
		LastRequest struct {
			SamplingParams map[string]any `json:"samplingParams"`
		} `json:"last_request"`
	}
	if err := json.Unmarshal(mustState(t, e), &state); err != nil {
		t.Fatal(err)
	}
	if got := state.LastRequest.SamplingParams["seed"]; got != "4" {
		t.Errorf("last_request sampling_params seed = %v, want \"4\" (int64 in protojson)", got)
	}
}

func mustState(t *testing.T, e *mock.Engine) []byte {
	t.Helper()
	b, err := json.Marshal(e.State())
	if err != nil {
		t.Fatal(err)
	}
	return b
}
