package enginemock

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// generation must end with its request, and every engine, server and
// command a test starts must be stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
