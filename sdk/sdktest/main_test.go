package sdktest_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// faultEnv names the reference adapter's fault in a child process: the
// test binary run for one broken adapter, and the adapter it launches.
const faultEnv = "SDKTEST_FAULT"

// testBinary is this test binary, which is also the reference adapter's
// executable.
var testBinary = os.Args[0]

// TestMain serves the reference adapter when launched as one, and
// otherwise runs the tests, failing the package if a check leaves a
// goroutine behind.
func TestMain(m *testing.M) {
	if sdktest.ServeAdapter(func() sdk.Engine { return newRef(fault(os.Getenv(faultEnv))) }) {
		return
	}
	goleak.VerifyTestMain(m)
}
