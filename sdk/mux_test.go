package sdk

import "testing"

// pluginPaths are the two ways a request crosses the plugin boundary: a
// Generate call of its own (an adapter built with an sdk before
// Multiplex) and the shared Multiplex stream.
var pluginPaths = []struct {
	name string
	mux  bool
}{{"generate", false}, {"multiplex", true}}

// testPluginEngineOn is TestPluginEngine with the host's Generate using
// Multiplex when mux is set, whatever Info would say.
func testPluginEngineOn(t testing.TB, mux bool, impl Engine) Engine {
	t.Helper()
	e := TestPluginEngine(t, impl)
	e.(*engineClient).multiplex.Store(mux)
	return e
}
