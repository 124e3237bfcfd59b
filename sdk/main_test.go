package sdk

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: event
// relays must end with their stream, and every plugin pair must be closed.
// Run with SDK_TEST_ADAPTER set, the test binary is an adapter instead.
func TestMain(m *testing.M) {
	if kind := os.Getenv(envTestAdapter); kind != "" {
		serveTestAdapter(kind)
		return
	}
	goleak.VerifyTestMain(m)
}
