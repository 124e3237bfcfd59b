package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/vigilhq/vigil/e2e/harness"
	"go.uber.org/goleak"
)

// vigilBin is the vigil binary under test, built once by TestMain with
// each row's mock and adapter.
var vigilBin string

func TestMain(m *testing.M) {
	defaultSIGHUPForChildren()
	if os.Getenv(envHUPProbe) != "" {
		hupProbe()
	}
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped with -short")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "vigil-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	vigilBin = filepath.Join(dir, "vigil")
	testAdapterBin = filepath.Join(dir, "vigil-adapter-test")
	builds := map[string]string{vigilBin: harness.VigilPkg, testAdapterBin: testAdapterPkg}
	for _, e := range engines {
		e.mockBin = filepath.Join(dir, e.Mock)
		builds[e.mockBin] = e.MockPkg
		if e.AdapterPkg != "" {
			e.adapterBin = filepath.Join(dir, "vigil-adapter-"+e.Name)
			builds[e.adapterBin] = e.AdapterPkg
		}
	}
	for bin, pkg := range builds {
		if err := goBuild("", "", bin, pkg); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
	}
	// The example adapter is its own module, outside the workspace, whose
	// go.mod names a released sdk: built here in a workspace of its own
	// with this tree's sdk (make example builds it as its author would).
	work, err := exampleWorkspace(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	toyAdapterBin, toyEngineBin = filepath.Join(dir, "vigil-adapter-toy"), filepath.Join(dir, "toy-engine")
	for bin, pkg := range map[string]string{toyAdapterBin: "./cmd/vigil-adapter-toy", toyEngineBin: "./cmd/toy-engine"} {
		if err := goBuild(exampleDir, work, bin, pkg); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	stopSharedConsul()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// exampleDir is the example adapter's module, relative to this package.
const exampleDir = "../examples/adapter"

// goBuild builds pkg into bin, with the race detector when the tests have
// it; in dir, under the workspace file work, when dir is set (a module
// outside go.work).
func goBuild(dir, work, bin, pkg string) error {
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if dir != "" {
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOWORK="+work)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s: %w", pkg, err)
	}
	return nil
}

// exampleWorkspace writes, in dir, a go.work of the example module with
// this tree's sdk in place of the release its go.mod names, and returns its
// path.
func exampleWorkspace(dir string) (string, error) {
	example, err := filepath.Abs(exampleDir)
	if err != nil {
		return "", err
	}
	sdk, err := filepath.Abs("../sdk")
	if err != nil {
		return "", err
	}
	work := filepath.Join(dir, "example.work")
	text := fmt.Sprintf("go %s\n\nuse %s\n\nreplace github.com/vigilhq/vigil/sdk => %s\n",
		strings.TrimPrefix(runtime.Version(), "go"), example, sdk)
	return work, os.WriteFile(work, []byte(text), 0o644)
}

// freePort returns a loopback TCP port that was free a moment ago and that
// no other test of this run was given.
func freePort(t testing.TB) int {
	t.Helper()
	p, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func addr(port int) string { return harness.Addr(port) }

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
}

// defaultSIGHUPForChildren makes the processes the tests start take
// SIGHUP's default action even when the suite itself runs with it ignored
// (under nohup): an ignored signal stays ignored across exec, and
// signal.Reset would restore just that. A signal Go handles is reset to
// its default in a child, so the test binary handles SIGHUP (dropping it:
// the suite stays as immune as nohup made it) and its children are the
// ones a terminal would have started.
func defaultSIGHUPForChildren() {
	if signal.Ignored(syscall.SIGHUP) {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
}

// envHUPProbe makes the test binary a probe (see TestSIGHUPUnderNohup):
// it starts a shell that sends itself SIGHUP and prints what became of it.
const envHUPProbe = "E2E_HUP_PROBE"

// hupProbe is the test binary as a probe of the SIGHUP disposition its
// children get.
func hupProbe() {
	err := exec.Command("/bin/sh", "-c", "kill -HUP $$; exit 0").Run()
	fmt.Printf("child: %v\n", err)
	os.Exit(0)
}
