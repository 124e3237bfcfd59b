package sdktest_test

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/sdk/sdktest"
)

// TestEngineReference: the reference adapter follows every rule, in every
// mode.
func TestEngineReference(t *testing.T) {
	sdktest.TestEngine(t, refHarness(""))
}

// childEnv marks the test binary run as a child by TestEngineReportsViolations.
const childEnv = "SDKTEST_CHILD"

// TestBrokenEngine runs TestEngine on the reference adapter broken by the
// fault in $SDKTEST_FAULT; only TestEngineReportsViolations runs it, in a
// child process, since it is meant to fail.
func TestBrokenEngine(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestEngineReportsViolations")
	}
	h := refHarness(fault(os.Getenv(faultEnv)))
	switch os.Getenv(childEnv) {
	case "no hooks":
		h.Fail, h.NotReady, h.Ready, h.Hold, h.Aborted = nil, nil, nil, nil, nil
	case "no aborted":
		h.Aborted = nil
	}
	sdktest.TestEngine(t, h)
}

// TestEngineReportsViolations runs TestEngine on broken reference adapters,
// each in a child process (this test binary again, as go-plugin's tests
// do), and checks that it fails each rule broken, in the modes where the
// break shows, with a message that says so; and that a rule missing its
// hook is skipped, naming it.
func TestEngineReportsViolations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs TestEngine in child processes")
	}
	all := []string{"direct", "plugin", "executable"}
	tests := map[string]struct {
		fault     fault
		rule      string
		modes     []string // where the rule fails
		want      []string // in the output
		noAborted bool     // the Harness has no Aborted hook
	}{
		// Without the hook the kit's proxy sees the stream stay open.
		"leaves the engine stream open": {
			fault: faultStreamLeftOpen, rule: "GenerateCancel", modes: all, noAborted: true,
			want: []string{`engine streams ["/sdktest.Ref/Generate"] of request sdktest-`, "still open 5s after its ctx ended, want each reset or ended"},
		},
		"refuses IgnoreEOS without naming it": {
			fault: faultRefusesIgnoreEOS, rule: "GenerateIgnoreEOS", modes: all,
			want: []string{`Generate(IgnoreEOS: true) error = invalid argument: the engine does not ignore the end of sequence, want the generation, or a refusal wrapping sdk.ErrInvalidArgument whose message starts "invalid argument: ignore_eos:"`},
		},
		"accepts unknown options": {
			fault: faultOptions, rule: "StartUnknownOption", modes: all,
			want: []string{`Start(Options: {"sdktest-unknown-option": "1"}) error = <nil>, want a *sdk.FieldError for StartRequest.Options naming "sdktest-unknown-option"`},
		},
		// Across the boundary the sdk's server says Lost for the adapter,
		// with a reason of its own.
		"closes the watch without Lost": {
			fault: faultCloseWithoutLost, rule: "StoppedIsLost", modes: all,
			want: []string{
				"availability channel closed without a Lost event after the engine shut down, want Lost before the close",
				// A NotReady may come first: the engine stops serving as it
				// shuts down.
				`= LOST ("adapter ended the availability stream"): the adapter closed its availability channel without a Lost event, want Lost before the close`,
			},
		},
		"closes the watch without Lost, engine failed": {
			fault: faultCloseWithoutLost, rule: "FailedIsLost", modes: all,
			want: []string{"availability channel closed without a Lost event after the engine reported failure"},
		},
		// The sdk's server refuses the late send, so only direct shows it.
		"sends a chunk after the final message": {
			fault: faultLateChunk, rule: "Generate", modes: []string{"direct"},
			want: []string{"send called with chunk 5 after Generate returned its result, want no chunk after the final one"},
		},
		// Across the boundary the host's Generate returns on its own ctx;
		// the engine still never sees the abort.
		"ignores context cancellation in Generate": {
			fault: faultIgnoreCancel, rule: "GenerateCancel", modes: all,
			want: []string{
				"did not return within 5s after its ctx ended",
				"the engine saw no abort of request sdktest-",
			},
		},
		"claims Generate without implementing it": {
			fault: faultNoGenerator, rule: "Capabilities", modes: all,
			want: []string{
				"Info() Capabilities = {Readiness:true Generate:true Abort:true Embed:false} of struct { sdk.Engine }: unimplemented: the adapter claims Generate and Abort but does not implement sdk.Generator",
				"Info() error = unimplemented: the adapter claims Generate and Abort but does not implement sdk.Generator, want capabilities the adapter implements",
			},
		},
		"takes a slow answer for a failure": {
			fault: faultOwnTimeout, rule: "SlowIsNotLost", modes: all,
			want: []string{"with the engine's answers 500ms slow, want none: an answer within HealthPolicy.Timeout (2s) is never a failure"},
		},
		"wrong name, no version": {
			fault: faultInfo, rule: "Info", modes: all,
			want: []string{`Info() Name = "wrong", want "ref"`, `Info() Version = "", want a version`},
		},
		"malformed address not rejected": {
			fault: faultAddress, rule: "StartInvalidAddress", modes: all,
			want: []string{`Start(EngineAddr: "no-port") error = waiting for engine at no-port: address no-port: missing port in address, want a *sdk.FieldError for StartRequest.EngineAddr`},
		},
		"second Start succeeds": {
			fault: faultStartTwice, rule: "StartTwice", modes: all,
			want: []string{"error = <nil>, want an error wrapping sdk.ErrAlreadyStarted"},
		},
		"startup deadline unclassified": {
			fault: faultDeadline, rule: "StartupDeadline", modes: all,
			want: []string{"want an error wrapping sdk.ErrStartupDeadline"},
		},
		"logprobs short, the prompt's first known": {
			fault: faultLogprobsShort, rule: "GenerateLogprobs", modes: all,
			want: []string{
				"Logprobs, want one per token id",
				"PromptLogprobs[0].Chosen is not Unknown",
			},
		},
		"second Shutdown fails": {
			fault: faultShutdownTwice, rule: "ShutdownIdempotent", modes: all,
			want: []string{"second Shutdown() = already shut down, want nil"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			child := string(tt.fault)
			if tt.noAborted {
				child = "no aborted"
			}
			out, ok := runChild(t, child, tt.fault, tt.rule)
			if ok {
				t.Fatalf("TestEngine passed the adapter broken by %q, want it to fail rule %s; output:\n%s", tt.fault, tt.rule, out)
			}
			for _, m := range all {
				line := "--- FAIL: TestBrokenEngine/" + tt.rule + "/" + m + " "
				if got, want := strings.Contains(out, line), slices.Contains(tt.modes, m); got != want {
					t.Errorf("rule %s in mode %s failed: %v, want %v; output:\n%s", tt.rule, m, got, want, out)
				}
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("TestEngine output lacks %q; output:\n%s", want, out)
				}
			}
		})
	}
	t.Run("missing hooks", func(t *testing.T) {
		t.Parallel()
		rules := map[string]string{
			"FailedIsLost":    "Harness.Fail",
			"NotReadyAndBack": "Harness.NotReady, Harness.Ready",
			"GenerateCancel":  "Harness.Hold",
			"Abort":           "Harness.Hold",
		}
		var names []string
		for r := range rules {
			names = append(names, r)
		}
		out, ok := runChild(t, "no hooks", "", strings.Join(names, "|"))
		if !ok {
			t.Fatalf("TestEngine without hooks failed, want every rule that needs one skipped; output:\n%s", out)
		}
		for r, hooks := range rules {
			for _, m := range []string{"direct", "plugin", "executable"} {
				name := "TestBrokenEngine/" + r + "/" + m
				if !strings.Contains(out, "--- SKIP: "+name+" ") || !strings.Contains(logOf(out, name), ": needs hook "+hooks+"\n") {
					t.Errorf("rule %s in mode %s: no skip naming %s; output:\n%s", r, m, hooks, out)
				}
			}
		}
	})
}

// TestEngineAbortByStreamClose: an adapter for an engine without an abort
// call, whose Generation closes the engine stream for the abort, passes the
// rules about aborts with no Aborted hook (Abort is skipped: it claims no
// Capabilities.Abort).
func TestEngineAbortByStreamClose(t *testing.T) {
	if testing.Short() {
		t.Skip("runs TestEngine in a child process")
	}
	t.Parallel()
	out, ok := runChild(t, "no aborted", noAbortCall, "GenerateCancel|GenerateSendError|Abort")
	if !ok {
		t.Fatalf("TestEngine failed the adapter that aborts by closing its stream, want it passed; output:\n%s", out)
	}
	for _, rule := range []string{"GenerateCancel", "GenerateSendError"} {
		for _, m := range []string{"direct", "plugin", "executable"} {
			if name := "TestBrokenEngine/" + rule + "/" + m; !strings.Contains(out, "--- PASS: "+name+" ") {
				t.Errorf("rule %s in mode %s did not pass; output:\n%s", rule, m, out)
			}
		}
	}
}

// logOf returns what test name logged in -test.v output: the lines after
// its "=== RUN" line, up to the next test's.
func logOf(out, name string) string {
	_, after, _ := strings.Cut(out, "=== RUN   "+name+"\n")
	log, _, _ := strings.Cut(after, "=== RUN   ")
	return log
}

// runChild runs TestBrokenEngine's rules matching rules (a regexp
// alternation of rule names) in a child process with the reference adapter
// broken by f, and returns its output and whether it passed.
func runChild(t *testing.T, child string, f fault, rules string) (string, bool) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), testBinary, "-test.run=^TestBrokenEngine$/^("+rules+")$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+child, faultEnv+"="+string(f))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		t.Fatalf("child TestBrokenEngine: %v, want exit status 0 or 1; output:\n%s", err, out)
	}
	return string(out), err == nil
}
