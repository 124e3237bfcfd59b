// Command vigil-adapter-test is the end-to-end tests' engine adapter:
// vLLM's adapter under the name its file gives it (vigil-adapter-NAME
// reports NAME), which on its first Info logs and writes in every way an
// adapter may, and logs the names in its environment. TEST_ADAPTER_MODE
// (which vigil passes on only when --plugin-env names it) makes it
// misbehave instead:
//   - protocol-2: it speaks vigil.plugin protocol 2, which no vigil does;
//   - claims-generate: it claims Generate without implementing it.
//
// TEST_ADAPTER_HANG (passed on likewise) names the calls of the vLLM adapter
// that hang, comma-separated: Info, Start, WatchAvailability, Generate,
// Abort, Shutdown. Each logs "test adapter hanging in NAME" and never
// returns, whatever its context: an adapter stuck in a call.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-plugin"
	"github.com/vigilhq/vigil/plugins/vllm"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/pluginhost"
	"google.golang.org/grpc"
)

// Lines the tests look for in vigil's log.
const (
	LineWarn   = "test adapter warning"
	LineDebug  = "test adapter debug line"
	LineStdout = "test adapter stdout line"
	LineStderr = "test adapter stderr line"
	LineLog    = "test adapter log package line"
	LineLong   = "test adapter long line"
	LineCut    = "test adapter overlong line"
	// LineHanging, followed by the call's name, is logged as a call hangs.
	LineHanging = "test adapter hanging in"
)

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "vigil-adapter-")
	switch mode := os.Getenv("TEST_ADAPTER_MODE"); mode {
	case "":
		a := &adapter{Adapter: vllm.New(), name: name}
		if hang := os.Getenv("TEST_ADAPTER_HANG"); hang != "" {
			sdk.Serve(&hanging{adapter: a, hang: strings.Split(hang, ",")})
			return
		}
		sdk.Serve(a)
	case "claims-generate":
		sdk.Serve(&withoutGenerate{a: vllm.New(), name: name})
	case "protocol-2":
		hs := pluginhost.Handshake
		hs.ProtocolVersion = 2
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  hs,
			VersionedPlugins: map[int]plugin.PluginSet{2: {pluginhost.PluginName: grpcPlugin{}}},
			GRPCServer:       plugin.DefaultGRPCServer,
		})
	default:
		fmt.Fprintf(os.Stderr, "TEST_ADAPTER_MODE=%q: unknown mode\n", mode)
		os.Exit(2)
	}
}

// adapter is vLLM's adapter named name, which logs on its first Info.
type adapter struct {
	*vllm.Adapter
	name string
	once sync.Once
}

func (a *adapter) Info(ctx context.Context) (sdk.AdapterInfo, error) {
	a.once.Do(logEverything)
	info, err := a.Adapter.Info(ctx)
	info.Name = a.name
	return info, err
}

// logEverything logs at WARN and DEBUG with sdk.Logger, writes to stdout
// and stderr and with the log package, and logs a line longer than
// go-plugin's 64 KiB buffer and one longer than sdk.MaxLogLine.
func logEverything() {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		env = append(env, name)
	}
	slices.Sort(env)
	sdk.Logger().Warn(LineWarn, "env", strings.Join(env, ","),
		"consul_http_token_set", os.Getenv("CONSUL_HTTP_TOKEN") != "")
	sdk.Logger().Debug(LineDebug)
	fmt.Println(LineStdout)
	fmt.Fprintln(os.Stderr, LineStderr)
	log.Print(LineLog)
	sdk.Logger().Info(LineLong, "payload", strings.Repeat("x", 100<<10))
	sdk.Logger().Info(LineCut, "payload", strings.Repeat("y", sdk.MaxLogLine+1))
}

// withoutGenerate claims Generate but is no sdk.Generator.
type withoutGenerate struct {
	a    *vllm.Adapter
	name string
}

func (w *withoutGenerate) Info(ctx context.Context) (sdk.AdapterInfo, error) {
	info, err := w.a.Info(ctx)
	info.Name, info.Capabilities.Generate = w.name, true
	return info, err
}

func (w *withoutGenerate) Start(ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	return w.a.Start(ctx, req)
}

func (w *withoutGenerate) WatchAvailability(ctx context.Context) (<-chan sdk.Event, error) {
	return w.a.WatchAvailability(ctx)
}

func (w *withoutGenerate) Shutdown(ctx context.Context) error { return w.a.Shutdown(ctx) }

// grpcPlugin is a gRPC plugin serving nothing: the protocol-2 adapter is
// refused at the handshake, before anything is called.
type grpcPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (grpcPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }

func (grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

// hanging is the adapter with the calls hang names never returning.
type hanging struct {
	*adapter
	hang []string
}

var (
	_ sdk.Engine    = (*hanging)(nil)
	_ sdk.Generator = (*hanging)(nil)
)

// block never returns if call is one that hangs.
func (h *hanging) block(call string) {
	if slices.Contains(h.hang, call) {
		sdk.Logger().Warn(LineHanging + " " + call)
		select {}
	}
}

func (h *hanging) Info(ctx context.Context) (sdk.AdapterInfo, error) {
	h.block("Info")
	return h.adapter.Info(ctx)
}

func (h *hanging) Start(ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	h.block("Start")
	return h.adapter.Start(ctx, req)
}

func (h *hanging) WatchAvailability(ctx context.Context) (<-chan sdk.Event, error) {
	h.block("WatchAvailability")
	return h.adapter.WatchAvailability(ctx)
}

func (h *hanging) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	h.block("Generate")
	return h.adapter.Generate(ctx, req, send)
}

func (h *hanging) Abort(ctx context.Context, ids []string) error {
	h.block("Abort")
	return h.adapter.Abort(ctx, ids)
}

func (h *hanging) Shutdown(ctx context.Context) error {
	h.block("Shutdown")
	return h.adapter.Shutdown(ctx)
}
