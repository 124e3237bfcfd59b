package sdk

import (
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/vigilhq/vigil/sdk/internal/wire"
)

// TestPluginEngine returns an Engine that calls impl across a real plugin
// boundary, for tests. The boundary is go-plugin's in-process gRPC pair
// (plugin.TestPluginGRPCConn) with the same server and client adapters that
// Serve and pluginhost.Launch use. Calls and errors therefore cross vigil.plugin.v1 as
// they would to and from an adapter subprocess, so a test can check that
// error classes and events survive gRPC.
//
// There is no process, so transport failures never become ErrPluginExited.
// The pair is closed when t's test and its subtests end; call impl's
// Shutdown through the returned Engine before that if the test needs it.
func TestPluginEngine(t testing.TB, impl Engine) Engine {
	t.Helper()
	plugins := map[string]plugin.Plugin{wire.PluginName: &enginePlugin{impl: impl}}
	client, server := plugin.TestPluginGRPCConn(t, false, plugins)
	t.Cleanup(func() {
		// Close asks the server to stop through go-plugin's controller.
		// Calling server.Stop as well would race with that, so it is only
		// the fallback for a server that did not hear the request.
		_ = client.Close()
		select {
		case <-server.DoneCh:
		case <-time.After(5 * time.Second):
			server.Stop()
			<-server.DoneCh
		}
	})
	raw, err := client.Dispense(wire.PluginName)
	if err != nil {
		t.Fatalf("dispensing the engine plugin: %v", err)
	}
	e, ok := raw.(Engine)
	if !ok {
		t.Fatalf("dispensed plugin is %T, want an sdk.Engine", raw)
	}
	return e
}
