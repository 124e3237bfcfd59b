package sdk

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: event
// relays must end with their stream, and every plugin pair must be closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
