package trtllm_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/vigilhq/vigil/plugins/trtllm"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// TestMain serves the adapter when TestConformance launches this binary as
// its executable, and otherwise runs the tests, failing the package if one
// leaves a goroutine behind.
func TestMain(m *testing.M) {
	if sdktest.ServeAdapter(func() sdk.Engine { return trtllm.New() }) {
		return
	}
	goleak.VerifyTestMain(m)
}
