package sdktest

import (
	"context"
	"testing"
)

// tb is what a rule reports to: the methods of *testing.T the kit uses,
// with Run taking a rule's function. TestEngine gives the rules a
// *testing.T (testingT), Check a runner of its own (runT).
type tb interface {
	Helper()
	Log(args ...any)
	Logf(format string, args ...any)
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Skipf(format string, args ...any)
	Failed() bool
	Context() context.Context
	Cleanup(f func())
	Run(name string, f func(t tb)) bool
}

// testingT is a *testing.T as a tb.
type testingT struct{ *testing.T }

func (t testingT) Run(name string, f func(t tb)) bool {
	return t.T.Run(name, func(t *testing.T) { f(testingT{t}) })
}

// testingOf returns the *testing.T under t, for the Harness's hooks and
// the sdk's test helpers; only TestEngine calls them, with a testingT.
func testingOf(t tb) *testing.T {
	tt, ok := t.(testingT)
	if !ok {
		panic("sdktest: a *testing.T is needed outside TestEngine")
	}
	return tt.T
}
