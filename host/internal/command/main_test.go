package command

import (
	"os"
	"testing"

	"github.com/vigilhq/vigil/host/internal/builtin"
)

// TestMain lets the test binary serve a built-in adapter when re-run as
// one, as vigil's main does: --dry-run starts a third-party adapter for
// its handshake, which the tests make of this binary.
func TestMain(m *testing.M) {
	if builtin.ServeIfAdapter() {
		return
	}
	os.Exit(m.Run())
}
