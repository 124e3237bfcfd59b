package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/internal/wire"
	"golang.org/x/sys/unix"
)

// envTestAdapter makes the test binary an adapter (see TestMain) of the
// kind it names, as go-plugin's own tests re-run theirs.
const envTestAdapter = "SDK_TEST_ADAPTER"

// serveTestAdapter serves the test adapter kind.
func serveTestAdapter(kind string) {
	switch kind {
	case "logs":
		sdk.Serve(&stubEngine{info: logOnInfo()})
	case "claims-generate":
		sdk.Serve(&stubEngine{info: func(context.Context) (sdk.AdapterInfo, error) {
			return sdk.AdapterInfo{Name: "claims", Capabilities: sdk.Capabilities{Generate: true}}, nil
		}})
	case "generate-exit":
		// Forwards requests: each sends a token and waits, except
		// request "exit", which ends the process.
		sdk.Serve(&stubGenerator{
			stubEngine: stubEngine{info: func(context.Context) (sdk.AdapterInfo, error) {
				return sdk.AdapterInfo{Name: "generate-exit", Capabilities: sdk.Capabilities{Generate: true}}, nil
			}},
			generate: func(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
				if req.RequestID == "exit" {
					os.Exit(3)
				}
				if err := send(sdk.Chunk{TokenIDs: []uint32{1}}); err != nil {
					return sdk.Result{}, err
				}
				<-ctx.Done()
				return sdk.Result{}, ctx.Err()
			},
		})
	case "serving":
		// Serves until killed: Start succeeds, and the watch says
		// SERVING once and then nothing.
		sdk.Serve(&stubEngine{
			info: func(context.Context) (sdk.AdapterInfo, error) { return sdk.AdapterInfo{Name: "serving"}, nil },
			start: func(context.Context, sdk.StartRequest) (sdk.Worker, error) {
				return sdk.Worker{ServedModelName: "m"}, nil
			},
			watch: func(ctx context.Context) (<-chan sdk.Event, error) {
				out := make(chan sdk.Event, 1)
				out <- sdk.Event{Availability: sdk.Serving, Reason: "serving", Time: time.Now()}
				go func() { <-ctx.Done(); close(out) }()
				return out, nil
			},
		})
	case "protocol-2":
		// Another protocol version on the same handshake: only the
		// version differs from what an adapter of this sdk sends.
		hs := Handshake
		hs.ProtocolVersion = 2
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  hs,
			VersionedPlugins: map[int]plugin.PluginSet{2: wire.HostPluginSets()[1]},
			GRPCServer:       plugin.DefaultGRPCServer,
			Logger:           hclog.NewNullLogger(),
		})
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: unknown kind\n", envTestAdapter, kind)
		os.Exit(2)
	}
}

// logOnInfo is an Info that, the first time, logs and writes in every way
// an adapter may: at each level through sdk.Logger, to stdout and stderr, with
// the log package, and lines longer than go-plugin's buffer and sdk.MaxLogLine.
func logOnInfo() func(context.Context) (sdk.AdapterInfo, error) {
	var once sync.Once
	return func(context.Context) (sdk.AdapterInfo, error) {
		once.Do(func() {
			var env []string
			for _, kv := range os.Environ() {
				name, _, _ := strings.Cut(kv, "=")
				env = append(env, name)
			}
			slices.Sort(env)
			sdk.Logger().Warn("adapter warning", "env", strings.Join(env, ","))
			sdk.Logger().Debug("adapter debug line")
			fmt.Println("adapter stdout line")
			fmt.Fprintln(os.Stderr, "adapter stderr line")
			log.Print("adapter log package line")
			sdk.Logger().Info("adapter long line", "payload", strings.Repeat("x", 100<<10))
			sdk.Logger().Error("adapter overlong line", "payload", strings.Repeat("y", 2*sdk.MaxLogLine))
			sdk.Logger().Info("adapter done logging")
		})
		return sdk.AdapterInfo{Name: "logs"}, nil
	}
}

// launchTest launches the test binary as an adapter of kind with env, its
// lines logged into rec at INFO under "host.<kind>".
func launchTest(t *testing.T, kind string, rec *recorder, env ...string) (*Plugin, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append([]string{envTestAdapter + "=" + kind}, env...)
	p, err := Launch(t.Context(), LaunchConfig{Cmd: cmd, Name: kind, Logger: rec.logger("host", hclog.Info)})
	if err == nil {
		t.Cleanup(p.Kill)
	}
	return p, err
}

// await waits for a line holding substr and returns it.
func (r *recorder) await(t *testing.T, substr string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		lines, changed := r.snapshot()
		for _, l := range lines {
			if strings.Contains(l, substr) {
				return l
			}
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no line holding %q within 20s; lines:\n%s", substr, strings.Join(lines, "\n"))
		}
	}
}

// What an adapter logs and writes reaches the host's logger, named after
// the adapter, at the entry's level or at INFO; long lines arrive whole or
// cut with a marker; and the adapter's environment is the command's, with
// go-plugin's variables and the log level added, and nothing of the host's.
func TestLaunchRelaysAdapterOutput(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	p, err := launchTest(t, "logs", rec, "KEPT=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Engine.Info(t.Context()); err != nil {
		t.Fatal(err)
	}
	warn := rec.await(t, "adapter warning")
	if !strings.Contains(warn, "[WARN]  host.logs: adapter warning") {
		t.Errorf("warning not logged at WARN under host.logs: %q", warn)
	}
	for _, name := range []string{"KEPT", EnvLogLevel, Handshake.MagicCookieKey} {
		if !strings.Contains(warn, name) {
			t.Errorf("adapter's environment lacks %s: %q", name, warn)
		}
	}
	if home := os.Getenv("HOME"); home != "" && strings.Contains(warn, "HOME") {
		t.Errorf("adapter's environment has the host's HOME: %q", warn)
	}
	for substr, want := range map[string]string{
		"adapter stdout line":      "[INFO]  host.logs: adapter stdout line: stream=stdout",
		"adapter stderr line":      "[INFO]  host.logs: adapter stderr line: stream=stderr",
		"adapter log package line": "[INFO]  host.logs: adapter log package line",
		"adapter long line":        "payload=" + strings.Repeat("x", 100<<10) + " ",
		"adapter overlong line":    "[ERROR] host.logs: adapter overlong line",
	} {
		if line := rec.await(t, substr); !strings.Contains(line, want) {
			t.Errorf("line %.200q\ndoes not hold %.200q", line, want)
		}
	}
	if line := rec.await(t, "adapter overlong line"); !strings.Contains(line, "…[cut ") {
		t.Errorf("overlong line not marked as cut: %.200q", line)
	}
	rec.await(t, "adapter done logging")
	if lines, _ := rec.snapshot(); slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "adapter debug line") }) {
		t.Error("a DEBUG line reached a host logging at INFO")
	}
}

// An adapter claiming a capability it does not implement is refused by
// its own Info, with sdk.ErrUnimplemented naming the capability.
func TestInfoRefusesFalseClaims(t *testing.T) {
	t.Parallel()
	p, err := launchTest(t, "claims-generate", newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Engine.Info(t.Context())
	if !errors.Is(err, sdk.ErrUnimplemented) || !strings.Contains(err.Error(), "claims Generate but does not implement sdk.Generator") {
		t.Errorf("Info() error = %v, want sdk.ErrUnimplemented naming Generate", err)
	}
}

// Each way an executable fails the handshake is told apart, and no process
// is left behind.
func TestLaunchFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cmd     *exec.Cmd
		timeout time.Duration
		want    error
		says    string
	}{
		{"exits at once", exec.Command("/bin/true"), 0, ErrNotPlugin, "exited before the plugin handshake"},
		{"writes garbage", exec.Command("/bin/sh", "-c", "echo hello there"), 0, ErrNotPlugin, `wrote "hello there"`},
		{"not executable", exec.Command("/dev/null"), 0, ErrNotPlugin, "permission denied"},
		{"never shakes hands", exec.Command("/bin/sh", "-c", "exec sleep 30"), 300 * time.Millisecond, ErrStartTimeout, "within 300ms"},
		{"newer protocol", testAdapterCmd("protocol-2"), 0, ErrProtocolVersion, "upgrade vigil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := Launch(t.Context(), LaunchConfig{Cmd: tc.cmd, StartTimeout: tc.timeout})
			if err == nil {
				p.Kill()
				t.Fatal("Launch() succeeded, want an error")
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Launch() error = %v, want %v saying %q", err, tc.want, tc.says)
			}
			if tc.cmd.ProcessState == nil && tc.cmd.Process != nil {
				t.Errorf("process %d left running", tc.cmd.Process.Pid)
			}
		})
	}
}

func testAdapterCmd(kind string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{envTestAdapter + "=" + kind}
	return cmd
}

// A version older than the host's is the adapter's to upgrade.
func TestVersionMismatchOlderAdapter(t *testing.T) {
	t.Parallel()
	err := versionMismatch("incompatible API version with plugin. Plugin version: 0, Client versions: [1]")
	if !errors.Is(err, ErrProtocolVersion) || !strings.Contains(err.Error(), "rebuild the adapter with an sdk that speaks 1") {
		t.Errorf("versionMismatch() = %v, want ErrProtocolVersion telling to rebuild the adapter", err)
	}
}

// An adapter killed while its availability stream is open ends the stream
// with a sdk.Lost event saying that the adapter process exited, not only that
// a read failed.
func TestLostWhenAdapterKilled(t *testing.T) {
	t.Parallel()
	p, err := launchTest(t, "serving", newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Engine.Start(t.Context(), sdk.StartRequest{EngineAddr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	events, err := p.Engine.WatchAvailability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Availability != sdk.Serving {
		t.Fatalf("first event = %+v, want SERVING", ev)
	}
	proc, err := os.FindProcess(p.client.ReattachConfig().Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Availability != sdk.Lost || !strings.HasPrefix(ev.Reason, "adapter process exited: ") {
			t.Errorf("event after the kill = %+v, want sdk.Lost saying the adapter process exited", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s of the adapter's kill")
	}
}

// freeze stops the adapter process pid (SIGSTOP) and waits until it has
// stopped: kill returns before the signal takes effect, and an adapter
// still running a moment longer would answer. The wait leaves the stop
// to be reported again (WNOWAIT), so the process stays the Cmd's to
// reap.
func freeze(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			if err != nil {
				t.Fatalf("waiting for adapter %d to stop: %v", pid, err)
			}
			return
		}
	}
}

// KillContext kills a frozen adapter once its context ends, where Kill
// would wait for it for good; an adapter that exits in time is not killed.
func TestKillContext(t *testing.T) {
	t.Parallel()
	for _, frozen := range []bool{false, true} {
		t.Run(fmt.Sprintf("frozen=%v", frozen), func(t *testing.T) {
			t.Parallel()
			// A race-enabled adapter sleeps 1s at exit unless told not to.
			p, err := launchTest(t, "logs", newRecorder(), "GORACE=atexit_sleep_ms=0")
			if err != nil {
				t.Fatal(err)
			}
			if frozen {
				freeze(t, p.cmd.Process.Pid)
			}
			const bound = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(t.Context(), bound)
			defer cancel()
			start := time.Now()
			p.KillContext(ctx)
			if d := time.Since(start); d > bound+time.Second {
				t.Errorf("KillContext returned after %s, want within %s and a moment", d, bound)
			}
			if !p.Exited() {
				t.Error("adapter process still running after KillContext returned")
			}
			ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
			if killed := ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL; killed != frozen {
				t.Errorf("adapter killed by SIGKILL: %v, want %v (state %v)", killed, frozen, p.cmd.ProcessState)
			}
		})
	}
}

// TestMultiplexAdapterExit: the adapter process exiting fails every
// request in flight on the Multiplex stream with sdk.ErrPluginExited.
func TestMultiplexAdapterExit(t *testing.T) {
	t.Parallel()
	p, err := launchTest(t, "generate-exit", newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Engine.Info(t.Context()); err != nil {
		t.Fatal(err)
	}
	const n = 3
	started := make(chan struct{}, n)
	errs := make(chan error, n+1)
	for i := range n {
		go func() {
			var once sync.Once
			_, err := p.Engine.(sdk.Generator).Generate(t.Context(), sdk.GenerateRequest{RequestID: strconv.Itoa(i), TokenIDs: []uint32{1}}, func(sdk.Chunk) error {
				once.Do(func() { started <- struct{}{} })
				return nil
			})
			errs <- err
		}()
	}
	for range n {
		<-started
	}
	go func() {
		_, err := p.Engine.(sdk.Generator).Generate(t.Context(), sdk.GenerateRequest{RequestID: "exit", TokenIDs: []uint32{1}}, func(sdk.Chunk) error { return nil })
		errs <- err
	}()
	for range n + 1 {
		select {
		case err := <-errs:
			if !errors.Is(err, sdk.ErrPluginExited) {
				t.Errorf("Generate() in flight when the adapter exited = %v, want ErrPluginExited", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a request in flight did not end when the adapter exited")
		}
	}
}

// Ping answers while the adapter runs, fails within its context's bound
// while the adapter process is stopped (SIGSTOP, as a swap stall or a
// wedged server freezes it), answers again once it runs on, and says
// ErrPluginExited once it is gone.
func TestPingFrozenAdapter(t *testing.T) {
	t.Parallel()
	p, err := launchTest(t, "serving", newRecorder(), "GORACE=atexit_sleep_ms=0")
	if err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	// Before launchTest's Kill, which waits for a graceful exit for good.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	ping := func(bound time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		defer cancel()
		start := time.Now()
		err := p.Ping(ctx)
		return time.Since(start), err
	}
	if _, err := ping(10 * time.Second); err != nil {
		t.Fatalf("Ping() of a running adapter = %v, want nil", err)
	}
	freeze(t, pid)
	const bound = 300 * time.Millisecond
	took, err := ping(bound)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ping() of a stopped adapter = %v, want context.DeadlineExceeded", err)
	}
	if took > bound+time.Second {
		t.Errorf("Ping() of a stopped adapter returned after %s, want within %s and a moment", took, bound)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := ping(10 * time.Second); err != nil {
		t.Errorf("Ping() once the adapter runs on = %v, want nil", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	p.KillContext(ctx)
	if _, err := ping(10 * time.Second); !errors.Is(err, sdk.ErrPluginExited) {
		t.Errorf("Ping() of an exited adapter = %v, want sdk.ErrPluginExited", err)
	}
}
