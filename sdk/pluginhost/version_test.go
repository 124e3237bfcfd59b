package pluginhost

import (
	"fmt"
	"testing"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"github.com/vigilhq/vigil/sdk/internal/wire"
)

// The go-plugin protocol version and the proto package's version suffix
// must move together: a vigil.plugin.v2 is a new ProtocolVersion.
func TestProtocolVersionMatchesProtoPackage(t *testing.T) {
	got := string(pluginv1.File_vigil_plugin_v1_engine_proto.Package())
	if want := fmt.Sprintf("vigil.plugin.v%d", ProtocolVersion); got != want {
		t.Errorf("proto package = %q, want %q for ProtocolVersion %d", got, want, ProtocolVersion)
	}
	if _, ok := wire.HostPluginSets()[ProtocolVersion]; !ok {
		t.Errorf("no plugin set for ProtocolVersion %d", ProtocolVersion)
	}
}

// What this package documents is what both sides of the sdk use.
func TestHandshakeMatchesWire(t *testing.T) {
	if Handshake != wire.Handshake || ProtocolVersion != wire.ProtocolVersion || PluginName != wire.PluginName || EnvLogLevel != wire.EnvLogLevel {
		t.Errorf("pluginhost's handshake %+v, version %d, plugin %q, log variable %q differ from the sdk's %+v, %d, %q, %q",
			Handshake, ProtocolVersion, PluginName, EnvLogLevel, wire.Handshake, wire.ProtocolVersion, wire.PluginName, wire.EnvLogLevel)
	}
}
