package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/internal/wire"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// LaunchConfig configures Launch.
type LaunchConfig struct {
	// Cmd runs the adapter executable. For a built-in adapter it re-runs
	// the host's own executable. Its Env is the adapter's whole
	// environment, to which Launch adds go-plugin's variables and
	// EnvLogLevel; nil Env passes on the host's. Required.
	Cmd *exec.Cmd
	// Name names the adapter's lines in Logger: they are logged by
	// Logger.Named(Name). Default: the executable's file name (go-plugin's
	// choice, which for a built-in adapter is the host's own).
	Name string
	// Logger receives go-plugin's lines and, under Name, the adapter's:
	// its sdk.Logger's entries at their level, and what it writes to stdout and
	// stderr after Serve at INFO. The adapter is told its level
	// (EnvLogLevel). Default: discarded.
	Logger hclog.Logger
	// StartTimeout bounds the handshake. Default 30s.
	StartTimeout time.Duration
}

// DefaultStartTimeout is LaunchConfig.StartTimeout's default: an adapter
// does nothing slow before its handshake, so this only allows for a
// loaded machine.
const DefaultStartTimeout = 30 * time.Second

// Why Launch fails, besides its context ending and a config without a
// command (sdk.ErrInvalidArgument).
var (
	// ErrNotPlugin: the executable is not a vigil engine adapter: it could
	// not be run, or it exited or wrote something other than go-plugin's
	// handshake line first.
	ErrNotPlugin = errors.New("not a vigil engine adapter")
	// ErrProtocolVersion: the adapter speaks another version of the plugin
	// protocol than the host; the error says which side to upgrade.
	ErrProtocolVersion = errors.New("plugin protocol version mismatch")
	// ErrStartTimeout: the adapter did not complete the handshake within
	// LaunchConfig.StartTimeout.
	ErrStartTimeout = errors.New("the adapter did not complete the plugin handshake in time")
)

// Plugin is a running adapter subprocess.
type Plugin struct {
	// Engine is the adapter, called over gRPC. It is an sdk.Generator
	// too: an adapter without Capabilities.Generate refuses its calls.
	Engine sdk.Engine
	// Version is the negotiated vigil.plugin API version.
	Version int

	client *plugin.Client
	conn   *grpc.ClientConn // go-plugin's connection to the adapter
	cmd    *exec.Cmd        // go-plugin runs it: its Process is the adapter's
	stdio  []*wire.LineLogger
}

// Launch starts an adapter subprocess with AutoMTLS and returns it ready for
// calls. When ctx ends before the handshake completes, the process is killed
// and Launch returns an error wrapping ctx's; the handshake's own failures
// wrap ErrNotPlugin, ErrProtocolVersion or ErrStartTimeout, and a socket
// directory too long for the platform ErrSocketPath. On error no process
// is left running.
func Launch(ctx context.Context, cfg LaunchConfig) (*Plugin, error) {
	if cfg.Cmd == nil {
		return nil, fmt.Errorf("%w: launch config has no command", sdk.ErrInvalidArgument)
	}
	cfg = cfg.withDefaults()
	if err := CheckSocketPath(cfg.Cmd.Env); err != nil {
		return nil, fmt.Errorf("starting adapter %s: %w", cfg.Cmd.Path, err)
	}
	p := &Plugin{cmd: cfg.Cmd}
	p.client = plugin.NewClient(p.clientConfig(cfg))
	rpc, err := handshake(ctx, p.client)
	if err != nil {
		p.Kill()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("starting adapter %s: %w", cfg.Cmd.Path, ctx.Err())
		}
		return nil, fmt.Errorf("starting adapter %s: %w", cfg.Cmd.Path, launchFailure(err, cfg.StartTimeout))
	}
	raw, err := rpc.Dispense(wire.PluginName)
	if err != nil {
		p.Kill()
		return nil, fmt.Errorf("dispensing adapter %s: %w", cfg.Cmd.Path, err)
	}
	e, ok := raw.(sdk.Engine)
	if !ok || !wire.BindExited(raw, p.client.Exited) {
		p.Kill()
		return nil, fmt.Errorf("adapter %s: unexpected plugin type %T", cfg.Cmd.Path, raw)
	}
	p.Engine, p.Version = e, p.client.NegotiatedVersion()
	if g, ok := rpc.(*plugin.GRPCClient); ok {
		p.conn = g.Conn
	}
	return p, nil
}

func (cfg LaunchConfig) withDefaults() LaunchConfig {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.Name == "" {
		cfg.Name = filepath.Base(cfg.Cmd.Path)
	}
	if cfg.Cmd.Env == nil {
		cfg.Cmd.Env = os.Environ()
	}
	return cfg
}

// clientConfig is go-plugin's configuration for cfg; it sets the
// command's environment and the loggers of the adapter's output.
func (p *Plugin) clientConfig(cfg LaunchConfig) *plugin.ClientConfig {
	adapter := cfg.Logger.Named(cfg.Name)
	stdout := &wire.LineLogger{Log: adapter, Args: []any{"stream", "stdout"}, Max: sdk.MaxLogLine}
	stderr := &wire.LineLogger{Log: adapter, Args: []any{"stream", "stderr"}, Max: sdk.MaxLogLine}
	p.stdio = []*wire.LineLogger{stdout, stderr}
	cfg.Cmd.Env = append(cfg.Cmd.Env, EnvLogLevel+"="+cfg.Logger.GetLevel().String())
	return &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: wire.HostPluginSets(),
		Cmd:              cfg.Cmd,
		SkipHostEnv:      true, // Cmd.Env is the whole environment
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  wire.StreamDialOptions(),
		Logger:           relayLogger{Logger: cfg.Logger, exe: filepath.Base(cfg.Cmd.Path), name: cfg.Name},
		StartTimeout:     cfg.StartTimeout,
		// Whole lines up to MaxLogLine, which sdk.Logger keeps entries to.
		PluginLogBufferSize: sdk.MaxLogLine,
		SyncStdout:          stdout,
		SyncStderr:          stderr,
	}
}

// relayLogger is go-plugin's logger. go-plugin relays the adapter's stderr
// into its logger named after the executable's file, which for a built-in
// adapter is the host's own: that one is named after the adapter instead.
type relayLogger struct {
	hclog.Logger
	exe, name string
}

func (l relayLogger) Named(name string) hclog.Logger {
	if name == l.exe {
		name = l.name
	}
	return l.Logger.Named(name)
}

// handshake runs go-plugin's handshake, which takes no context: killing
// the process is what ends it early.
func handshake(ctx context.Context, client *plugin.Client) (plugin.ClientProtocol, error) {
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			client.Kill()
		case <-done:
		}
	}()
	rpc, err := client.Client()
	close(done)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return rpc, err
}

// go-plugin (v1.8.0) reports handshake failures as bare messages; these
// are their beginnings. TestLaunchFailures holds them to the go-plugin in
// go.mod.
const (
	msgTimeout      = "timeout while waiting for plugin to start"
	msgExited       = "plugin exited before we could connect"
	msgUnrecognized = "Unrecognized remote plugin message: "
	msgProtocol     = "unsupported plugin protocol"
	msgCoreVersion  = "incompatible core API version"
	msgAPIVersion   = "incompatible API version with plugin"
)

const exitedEarly = "it exited before the plugin handshake (an adapter calls sdk.Serve from main)"

// launchFailure is go-plugin's handshake error err as one of Launch's.
func launchFailure(err error, timeout time.Duration) error {
	msg := err.Error()
	var pathErr *fs.PathError
	var execErr *exec.Error
	switch {
	case strings.HasPrefix(msg, msgTimeout):
		return fmt.Errorf("%w: no handshake within %s", ErrStartTimeout, timeout)
	case strings.HasPrefix(msg, msgAPIVersion):
		return versionMismatch(msg)
	case strings.HasPrefix(msg, msgCoreVersion):
		return fmt.Errorf("%w: the adapter was built with another go-plugin core protocol: rebuild it with this vigil's sdk", ErrProtocolVersion)
	case strings.HasPrefix(msg, msgExited):
		return fmt.Errorf("%w: %s", ErrNotPlugin, exitedEarly)
	case strings.HasPrefix(msg, msgUnrecognized):
		first, _, _ := strings.Cut(strings.TrimPrefix(msg, msgUnrecognized), "\n")
		if first == "" { // it closed stdout, as by exiting, without a line
			return fmt.Errorf("%w: %s", ErrNotPlugin, exitedEarly)
		}
		return fmt.Errorf("%w: it wrote %q where the plugin handshake was due", ErrNotPlugin, string(wire.CutLine([]byte(first), 80)))
	case strings.HasPrefix(msg, msgProtocol):
		return fmt.Errorf("%w: it speaks go-plugin's net/rpc, not gRPC", ErrNotPlugin)
	case errors.As(err, &pathErr), errors.As(err, &execErr):
		return fmt.Errorf("%w: %w", ErrNotPlugin, err)
	}
	return err
}

// pluginVersion reads the adapter's version from go-plugin's mismatch
// message.
var pluginVersion = regexp.MustCompile(`Plugin version: (\d+)`)

// versionMismatch says which side of a protocol version mismatch to
// upgrade: the host when the adapter's version is newer than every version
// the host speaks, else the adapter.
func versionMismatch(msg string) error {
	var ours []int
	for v := range wire.HostPluginSets() {
		ours = append(ours, v)
	}
	slices.Sort(ours)
	m := pluginVersion.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%w: %s", ErrProtocolVersion, msg)
	}
	theirs, _ := strconv.Atoi(m[1])
	if theirs > ours[len(ours)-1] {
		return fmt.Errorf("%w: the adapter speaks vigil.plugin protocol %d, this host %v: upgrade vigil to a release that speaks %d",
			ErrProtocolVersion, theirs, ours, theirs)
	}
	return fmt.Errorf("%w: the adapter speaks vigil.plugin protocol %d, this host %v: rebuild the adapter with an sdk that speaks %d",
		ErrProtocolVersion, theirs, ours, ours[len(ours)-1])
}

// Ping asks the adapter process whether it answers, under ctx: a Check of
// the health service that every go-plugin server runs beside the plugin
// (service "plugin", whatever language the adapter is written in), which
// the server answers without the adapter's own code. Nil: it answered. An
// adapter that is stopped (SIGSTOP), swapped out or whose gRPC server is
// wedged answers nothing, and Ping returns ctx's error once ctx ends; an
// adapter that has exited, sdk.ErrPluginExited. A deadlock inside the
// adapter's Engine methods that leaves its server answering is not seen:
// the calls stuck in it end by their own contexts.
func (p *Plugin) Ping(ctx context.Context) error {
	if p.client.Exited() {
		return sdk.ErrPluginExited
	}
	_, err := healthpb.NewHealthClient(p.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: plugin.GRPCServiceName})
	switch {
	case err == nil:
		return nil
	case sdk.ContextErr(ctx) != nil:
		return fmt.Errorf("adapter ping unanswered: %w", sdk.ContextErr(ctx))
	case p.client.Exited():
		return fmt.Errorf("%w: %v", sdk.ErrPluginExited, err)
	}
	return fmt.Errorf("adapter ping: %w", err)
}

// Exited reports whether the adapter process has exited.
func (p *Plugin) Exited() bool { return p.client.Exited() }

// Kill stops the adapter: gracefully first, then forcibly after go-plugin's
// 2 s bound; a last line the adapter wrote without a newline is logged. It
// is idempotent.
func (p *Plugin) Kill() {
	p.client.Kill()
	for _, l := range p.stdio {
		l.Flush()
	}
}

// KillContext stops the adapter as Kill does, but forcibly (SIGKILL) as
// soon as ctx ends, however far its graceful exit has got: for a host that
// must exit within a bound even when the adapter is frozen, which would
// hold Kill for good. It returns once the process has exited.
func (p *Plugin) KillContext(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Kill()
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	if p.cmd.Process != nil {
		// Not reaped until Kill returns, so the pid is still the adapter's.
		_ = p.cmd.Process.Kill()
	}
	<-done
}
