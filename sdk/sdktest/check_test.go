package sdktest_test

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/vigilhq/vigil/sdk/sdktest"
)

// TestCheck: Check runs every rule against the built adapter and one live
// engine, skipping by name the rules that need a hook or the engine's
// stop, and passes the reference adapter; broken, the rule it breaks fails
// and Check says which.
func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every rule against the adapter executable")
	}
	for _, tt := range []struct {
		fault  fault
		failed []string // rules that fail
	}{
		{"", nil},
		{faultOptions, []string{"StartUnknownOption"}},
	} {
		t.Run(string(tt.fault), func(t *testing.T) {
			t.Parallel()
			results := check(t, tt.fault)
			want := map[string]sdktest.Outcome{
				"Info": sdktest.Passed, "Start": sdktest.Passed, "FrozenIsLost": sdktest.Passed,
				"GenerateIgnoreEOS": sdktest.Passed, "Generate": sdktest.Passed,
				"FailedIsLost": sdktest.Skipped, "NotReadyAndBack": sdktest.Skipped,
				"StoppedIsLost": sdktest.Skipped, "GenerateCancel": sdktest.Skipped,
			}
			for _, r := range tt.failed {
				want[r] = sdktest.Failed
			}
			for rule, outcome := range want {
				r, ok := results[rule]
				if !ok || r.Outcome != outcome {
					t.Errorf("rule %s: %+v, want %v", rule, r, outcome)
				}
			}
			for _, r := range results {
				if r.Outcome == sdktest.Failed && want[r.Rule] != sdktest.Failed {
					t.Errorf("rule %s failed, want it passed or skipped: %q", r.Rule, r.Log)
				}
			}
			if got := results["FailedIsLost"].Log; len(got) != 1 || got[0] != "needs hook Harness.Fail" {
				t.Errorf("FailedIsLost skipped with %q, want one line naming the hook", got)
			}
		})
	}
}

// check runs Check on the reference adapter broken by f, this test binary
// as its executable, against a reference engine; it checks Check's error
// and returns the results by rule.
func check(t *testing.T, f fault) map[string]sdktest.Result {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := newRefEngine()
	go e.Serve(lis)
	t.Cleanup(e.Stop)
	var mu sync.Mutex
	results := map[string]sdktest.Result{}
	err = sdktest.Check(t.Context(), sdktest.Live{
		Name: "ref",
		Command: func() *exec.Cmd {
			cmd := exec.Command(testBinary)
			cmd.Env = append(os.Environ(), faultEnv+"="+string(f))
			return cmd
		},
		EngineAddr: lis.Addr().String(),
	}, func(r sdktest.Result) {
		mu.Lock()
		defer mu.Unlock()
		if r.Mode != "executable" {
			t.Errorf("rule %s ran in mode %s, want executable only", r.Rule, r.Mode)
		}
		results[r.Rule] = r
	})
	switch {
	case f == "" && err != nil:
		t.Errorf("Check() = %v, want nil", err)
	case f != "" && (err == nil || !strings.Contains(err.Error(), "StartUnknownOption/executable")):
		t.Errorf("Check() = %v, want an error naming StartUnknownOption/executable", err)
	}
	return results
}
