package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/examples/adapter/fakeengine"
	"github.com/vigilhq/vigil/examples/adapter/toy"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/pluginhost"
)

// serveEnv makes this test binary the adapter (main), so that TestPlugin
// can start it as vigil starts an adapter, as go-plugin's own tests do.
const serveEnv = "VIGIL_ADAPTER_TOY_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestPlugin starts the executable through go-plugin's handshake with
// pluginhost.Launch, vigil's own way of starting an adapter, and drives it over
// vigil.plugin.v1: what the in-process tests cannot show is that main
// serves the adapter at all.
func TestPlugin(t *testing.T) {
	e, err := fakeengine.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	p, err := pluginhost.Launch(t.Context(), pluginhost.LaunchConfig{Cmd: cmd})
	if err != nil {
		t.Fatalf("Launch() = %v, want nil", err)
	}
	defer p.Kill()

	info, err := p.Engine.Info(t.Context())
	if err != nil || info.Name != toy.Name {
		t.Fatalf("Info() = %+v, %v; want name %q", info, err, toy.Name)
	}
	w, err := p.Engine.Start(t.Context(), sdk.StartRequest{EngineAddr: e.Addr, StartupDeadline: 10 * time.Second})
	if err != nil || w.ServedModelName != "toy-model" {
		t.Fatalf("Start() = %+v, %v; want the worker of toy-model", w, err)
	}
	gen, ok := p.Engine.(sdk.Generator)
	if !ok {
		t.Fatalf("the launched Engine is %T, want an sdk.Generator", p.Engine)
	}
	var text strings.Builder
	res, err := gen.Generate(t.Context(), sdk.GenerateRequest{RequestID: "r1", Text: "over the wire"}, func(c sdk.Chunk) error {
		text.WriteString(c.Text)
		return nil
	})
	if err != nil || res.FinishReason != sdk.FinishStop || text.String() != "over the wire" {
		t.Errorf("Generate() sent %q, returned %+v, %v; want %q, stop", text.String(), res, err, "over the wire")
	}
}
