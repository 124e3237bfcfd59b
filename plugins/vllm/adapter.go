package vllm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Name is the engine name vigil selects this adapter by (--engine vllm).
const Name = "vllm"

// Version is the adapter's version.
const Version = "0.2.0"

// engine names vLLM in reasons and errors.
const engine = "vLLM"

// Adapter implements sdk.Engine and sdk.Generator for vLLM, on the
// adapterkit. Create it with New.
type Adapter struct {
	*adapterkit.Adapter
}

var (
	_ sdk.Engine    = (*Adapter)(nil)
	_ sdk.Generator = (*Adapter)(nil)
)

// New returns a vLLM adapter; opts are the kit's (a fake clock in tests).
func New(opts ...adapterkit.Option) *Adapter {
	return &Adapter{adapterkit.New(adapterkit.Spec{
		Info: sdk.AdapterInfo{
			Name:         Name,
			Version:      Version,
			Capabilities: sdk.Capabilities{Readiness: true, Generate: true, Abort: true},
		},
		Engine:     engine,
		Signals:    signals,
		ReadWorker: readWorker,
		LifetimeID: lifetimeID,
	}, opts...)}
}

// signals: "" is liveness and "vllm.Inference" readiness; Start also waits
// for "vllm.Control", which serves the information it reads. vLLM turns ""
// NOT_SERVING at shutdown and then finishes the requests it has (its gRPC
// shutdown grace period, --shutdown-timeout): a drain on purpose while the
// connection holds.
func signals(_ context.Context, conn *grpc.ClientConn, _ map[string]string) ([]adapterkit.Signal, error) {
	return []adapterkit.Signal{
		adapterkit.DrainingHealthService(conn, ""),
		adapterkit.HealthService(conn, vllmpb.Inference_ServiceDesc.ServiceName, adapterkit.Readiness),
		adapterkit.HealthService(conn, vllmpb.Control_ServiceDesc.ServiceName, adapterkit.Startup),
	}, nil
}

func readWorker(ctx context.Context, conn *grpc.ClientConn) (sdk.Worker, error) {
	control := vllmpb.NewControlClient(conn)
	server, err := control.GetServerInfo(ctx, &vllmpb.GetServerInfoRequest{})
	if err != nil {
		return sdk.Worker{}, err
	}
	model, err := control.GetModelInfo(ctx, &vllmpb.GetModelInfoRequest{})
	if err != nil {
		return sdk.Worker{}, err
	}
	return sdk.Worker{
		ModelID:           model.GetModelId(),
		ServedModelName:   model.GetServedModelName(),
		EngineVersion:     server.GetEngineVersion(),
		InstanceID:        server.GetInstanceId(),
		MaxModelLen:       server.GetMaxModelLen(),
		KVBlockSize:       server.GetKvBlockSize(),
		SupportsTextInput: model.GetSupportsTextInput(),
		Accepts:           strings.Join(append(slices.Clone(accepts), logprobsAccepts(MaxLogprobs)...), ","),
		ReasoningParser:   model.GetReasoningParser(),
		ToolCallParser:    model.GetToolCallParser(),
	}, nil
}

// MaxLogprobs is vLLM's --max-logprobs default: the most alternatives per
// position it returns (its ServerInfo does not tell the engine's own).
// A request past it is refused, so the adapter lists it as the limit.
const MaxLogprobs = 20

// logprobsAccepts are the logprob capabilities with at most n alternatives
// per position, output and prompt.
func logprobsAccepts(n uint32) []string {
	return []string{fmt.Sprintf("logprobs=%d", n), fmt.Sprintf("prompt_logprobs=%d", n)}
}

// accepts is what vLLM's generate API takes beyond the basic request, as
// capability names (docs/worker-api.md, "Capabilities"), each mapped in
// toVLLM. Not n: vLLM's gRPC server refuses num_sequences > 1, so the host
// fans n out. Both grammar dialects: vLLM takes grammar text in one field
// and tells EBNF from Lark itself (see grammarDialects).
var accepts = []string{
	"choice", "frequency_penalty", "grammar.ebnf", "grammar.lark", "ignore_eos", "json_object", "json_schema",
	"logit_bias", "min_p", "min_tokens", "presence_penalty", "regex", "repetition_penalty", "seed", "stop",
	"structural_tag", "top_k",
}

// lifetimeID reads ServerInfo.instance_id, new each time an engine process
// starts.
func lifetimeID(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	server, err := vllmpb.NewControlClient(conn).GetServerInfo(ctx, &vllmpb.GetServerInfoRequest{})
	return server.GetInstanceId(), err
}
