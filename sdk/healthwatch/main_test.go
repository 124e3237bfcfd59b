package healthwatch_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// watch must end with its context or its error, and every server and
// connection a test opens must be closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
