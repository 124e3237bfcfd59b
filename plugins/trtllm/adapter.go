package trtllm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Name is the engine name vigil selects this adapter by (--engine trtllm).
const Name = "trtllm"

// Version is the adapter's version.
const Version = "0.1.0"

// engine names TensorRT-LLM in reasons and errors.
const engine = "TensorRT-LLM"

// healthy is HealthCheck's answer for a healthy server.
const healthy = "OK"

// Adapter implements sdk.Engine and sdk.Generator for TensorRT-LLM, on the
// adapterkit. Create it with New.
type Adapter struct {
	*adapterkit.Adapter

	mu        sync.Mutex
	maxSeqLen uint32 // GetModelInfo's max_seq_len, read by Start
	vocabSize uint32 // GetModelInfo's vocab_size, read by Start; 0 if unknown
}

var (
	_ sdk.Engine    = (*Adapter)(nil)
	_ sdk.Generator = (*Adapter)(nil)
)

// New returns a TensorRT-LLM adapter; opts are the kit's.
func New(opts ...adapterkit.Option) *Adapter {
	a := &Adapter{}
	a.Adapter = adapterkit.New(adapterkit.Spec{
		Info: sdk.AdapterInfo{
			Name:         Name,
			Version:      Version,
			Capabilities: sdk.Capabilities{Generate: true, Abort: true},
		},
		Engine:     engine,
		Signals:    signals,
		ReadWorker: a.readWorker,
	}, opts...)
	return a
}

// signals: HealthCheck, polled, is the only one.
func signals(_ context.Context, conn *grpc.ClientConn, _ map[string]string) ([]adapterkit.Signal, error) {
	client := trtllmpb.NewTrtllmServiceClient(conn)
	return []adapterkit.Signal{{
		Name: "HealthCheck",
		Role: adapterkit.Liveness,
		Check: func(ctx context.Context) error {
			resp, err := client.HealthCheck(ctx, &trtllmpb.HealthCheckRequest{}, grpc.WaitForReady(true))
			if err == nil && resp.GetStatus() != healthy {
				err = fmt.Errorf("status %q", resp.GetStatus())
			}
			return err
		},
	}}, nil
}

func (a *Adapter) readWorker(ctx context.Context, conn *grpc.ClientConn) (sdk.Worker, error) {
	client := trtllmpb.NewTrtllmServiceClient(conn)
	model, err := client.GetModelInfo(ctx, &trtllmpb.GetModelInfoRequest{})
	if err != nil {
		return sdk.Worker{}, fmt.Errorf("GetModelInfo: %w", err)
	}
	server, err := client.GetServerInfo(ctx, &trtllmpb.GetServerInfoRequest{})
	if err != nil {
		return sdk.Worker{}, fmt.Errorf("GetServerInfo: %w", err)
	}
	maxSeqLen := uint32(max(model.GetMaxSeqLen(), 0))
	vocabSize := uint32(max(model.GetVocabSize(), 0))
	a.mu.Lock()
	a.maxSeqLen, a.vocabSize = maxSeqLen, vocabSize
	a.mu.Unlock()
	return sdk.Worker{
		ModelID:         model.GetModelId(),
		ServedModelName: model.GetModelId(),
		EngineVersion:   server.GetVersion(),
		MaxModelLen:     maxSeqLen,
		Accepts:         strings.Join(accepts(vocabSize), ","),
	}, nil
}

// accepts is what TensorRT-LLM's generate API takes beyond the basic
// request, as capability names (docs/worker-api.md, "Capabilities"), each
// mapped in toTRT. logit_bias only with a known vocabulary size, which
// embedding_bias is built to. Not n, which the host fans out this release,
// nor choice, for which TensorRT-LLM has no guide (the host sends a regex);
// grammars are EBNF only (GUIDE_TYPE_EBNF_GRAMMAR, xgrammar's). Logprobs
// up to MaxLogprobs.
func accepts(vocabSize uint32) []string {
	names := []string{
		"frequency_penalty", "grammar.ebnf", "ignore_eos", "json_object", "json_schema", "min_p", "min_tokens",
		"presence_penalty", "regex", "repetition_penalty", "seed", "stop", "structural_tag", "top_k",
		fmt.Sprintf("logprobs=%d", MaxLogprobs), fmt.Sprintf("prompt_logprobs=%d", MaxLogprobs),
	}
	if vocabSize > 0 {
		names = append(names, "logit_bias")
	}
	slices.Sort(names)
	return names
}
