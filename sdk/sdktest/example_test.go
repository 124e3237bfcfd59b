package sdktest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/vigilhq/vigil/sdk/sdktest"
)

// Check holds a built adapter, in any language, to the rules against an
// engine that serves at an address, as vigil plugin check --conformance
// does; the rules that need a hook are reported skipped, saying which.
func ExampleCheck() {
	err := sdktest.Check(context.Background(), sdktest.Live{
		Name:       "myengine",
		Command:    func() *exec.Cmd { return exec.Command("./vigil-adapter-myengine") },
		EngineAddr: "127.0.0.1:50051",
	}, func(r sdktest.Result) {
		fmt.Println(r.Outcome, r.Rule, r.Log)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // names the rules that failed
		os.Exit(1)
	}
}
