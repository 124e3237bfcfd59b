package sdk

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-plugin"
	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"github.com/vigilhq/vigil/sdk/internal/wire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// recordingEngine is a Generator that records the requests reaching it
// and ends each at once.
type recordingEngine struct {
	stubEngine
	mu  sync.Mutex
	got []GenerateRequest
}

func (r *recordingEngine) Generate(_ context.Context, req GenerateRequest, _ func(Chunk) error) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req)
	return Result{FinishReason: FinishLength}, nil
}

func (r *recordingEngine) Abort(context.Context, []string) error { return nil }

func (r *recordingEngine) requests() []GenerateRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]GenerateRequest(nil), r.got...)
}

// fieldsEngine returns the host's Engine for impl, after Info, served by
// an adapter whose Info reports the GenerateRequest fields fields (nil:
// this sdk's own), on the path mux names.
func fieldsEngine(t *testing.T, impl Engine, fields []uint32, mux bool) *engineClient {
	t.Helper()
	return servedEngine(t, &countingServer{engineServer: &engineServer{impl: impl, noMultiplex: !mux, requestFields: fields}, old: !mux})
}

// TestUnreadRequestFields: a request field that the adapter's sdk does
// not read is refused before it reaches the adapter, naming the field,
// instead of being dropped there; the fields it reads pass, on both plugin
// paths.
func TestUnreadRequestFields(t *testing.T) {
	t.Parallel()
	minTokens := GenerateRequest{RequestID: "a", TokenIDs: []uint32{1}, MaxTokens: 4, MinTokens: 2}
	minP := GenerateRequest{RequestID: "b", TokenIDs: []uint32{1}, MaxTokens: 4, MinP: 0.5}
	plain := GenerateRequest{RequestID: "c", TokenIDs: []uint32{1}, MaxTokens: 4}
	for _, path := range pluginPaths {
		for _, tc := range []struct {
			name    string
			fields  []uint32
			req     GenerateRequest
			refused string // the field named, "" when the request passes
		}{
			{"this sdk: min_tokens", nil, minTokens, ""},
			{"this sdk: min_p", nil, minP, ""},
			{"fields 1-11: min_tokens", []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, minTokens, "min_tokens"},
			{"fields 1-11: min_p", []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, minP, "min_p"},
			{"fields 1-11: fields it reads", []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, plain, ""},
			{"min_tokens but not min_p: min_p", []uint32{1, 3, 8, 13}, minP, "min_p"},
			{"min_tokens but not min_p: min_tokens", []uint32{1, 3, 8, 13}, minTokens, ""},
		} {
			t.Run(path.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				impl := &recordingEngine{stubEngine: stubEngine{info: func(context.Context) (AdapterInfo, error) {
					return AdapterInfo{Name: "rec", Capabilities: Capabilities{Generate: true}}, nil
				}}}
				e := fieldsEngine(t, impl, tc.fields, path.mux)
				_, err := e.Generate(t.Context(), tc.req, func(Chunk) error { return nil })
				got := impl.requests()
				if tc.refused != "" {
					if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.refused+": adapter \"rec\"") {
						t.Errorf("Generate = %v, want ErrInvalidArgument naming %s", err, tc.refused)
					}
					if len(got) != 0 {
						t.Errorf("the adapter got %d requests, want none", len(got))
					}
					return
				}
				if err != nil || len(got) != 1 {
					t.Fatalf("Generate = %v with %d requests at the adapter, want nil and 1", err, len(got))
				}
				if got[0].MinTokens != tc.req.MinTokens || got[0].MinP != tc.req.MinP {
					t.Errorf("adapter got min_tokens %d, min_p %v; want %d, %v", got[0].MinTokens, got[0].MinP, tc.req.MinTokens, tc.req.MinP)
				}
			})
		}
	}
}

// TestNoRequestFields: an adapter that forwards requests but lists no
// generate_request_fields is refused at Info, naming the field; one that
// does not forward requests need not list them.
func TestNoRequestFields(t *testing.T) {
	t.Parallel()
	for _, generate := range []bool{true, false} {
		impl := &recordingEngine{stubEngine: stubEngine{info: func(context.Context) (AdapterInfo, error) {
			return AdapterInfo{Name: "rec", Capabilities: Capabilities{Generate: generate}}, nil
		}}}
		client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{wire.PluginName: &countingPlugin{
			srv: &countingServer{engineServer: &engineServer{impl: impl, requestFields: []uint32{}}},
		}})
		t.Cleanup(func() {
			_ = client.Close()
			<-server.DoneCh
		})
		raw, err := client.Dispense(wire.PluginName)
		if err != nil {
			t.Fatal(err)
		}
		_, err = raw.(*engineClient).Info(t.Context())
		switch {
		case generate && (!errors.Is(err, ErrUnimplemented) || !strings.Contains(err.Error(), "generate_request_fields")):
			t.Errorf("Info() of a forwarding adapter without request fields = %v, want ErrUnimplemented naming generate_request_fields", err)
		case !generate && err != nil:
			t.Errorf("Info() of an adapter that does not forward requests, without request fields = %v, want nil", err)
		}
	}
}

// An adapter claims only the request fields the sdk converts: one built
// from this tree would otherwise be sent fields it drops. Every listed field
// is set in full below and survives the trip into a GenerateRequest and back.
func TestRequestFieldsOnlyConverted(t *testing.T) {
	rp, seed, topK := float32(1.2), int64(3), uint32(5)
	full := &pluginv1.GenerateRequest{
		RequestId: "r", Prompt: &pluginv1.GenerateRequest_Text{Text: "hi"}, Temperature: &rp, TopP: &rp,
		TopK: &topK, Seed: &seed, MaxTokens: 9, StopTokenIds: []uint32{2}, Stop: []string{"x"}, IgnoreEos: true,
		MinTokens: 1, MinP: 0.1, PresencePenalty: 0.5, FrequencyPenalty: 0.25, RepetitionPenalty: &rp,
		LogitBias:        map[uint32]float32{4: 1},
		StructuredOutput: &pluginv1.StructuredOutput{Kind: &pluginv1.StructuredOutput_Regex{Regex: "a"}},
		Logprobs:         &pluginv1.Logprobs{Output: true, Top: 5, Prompt: true, PromptTop: 1},
	}
	set := map[protoreflect.FieldNumber]bool{}
	full.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		set[fd.Number()] = true
		return true
	})
	ids := proto.CloneOf(full)
	ids.Prompt = &pluginv1.GenerateRequest_TokenIds{TokenIds: &pluginv1.TokenIds{Ids: []uint32{1}}}
	if got := generateRequestToProto(generateRequestFromProto(ids)); !proto.Equal(got, ids) {
		t.Errorf("token ids lost on the way:\n got %v\nwant %v", got, ids)
	}
	set[3] = true // the prompt oneof's other arm, checked just above
	for _, n := range generateRequestFields() {
		if !set[protoreflect.FieldNumber(n)] {
			t.Errorf("generate_request_fields lists %d, which this test does not set", n)
		}
	}
	if got := generateRequestToProto(generateRequestFromProto(full)); !proto.Equal(got, full) {
		t.Errorf("a request of every listed field lost some on the way:\n got %v\nwant %v", got, full)
	}
	for n := range notConverted {
		if slices.Contains(generateRequestFields(), uint32(n)) {
			t.Errorf("generate_request_fields lists %d, which the sdk does not convert", n)
		}
	}
}
