package adapterkit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// source must end with Merge, every connection with Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
