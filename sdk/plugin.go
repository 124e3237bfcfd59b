package sdk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"google.golang.org/grpc"
)

// ProtocolVersion is the vigil.plugin API version this SDK speaks. Host and
// adapter negotiate the highest version both list in their plugin sets.
const ProtocolVersion = 1

// PluginName is the key of the engine plugin in a plugin set.
const PluginName = "engine"

// Handshake is shared by host and adapters. The magic cookie is not a
// security measure: it stops an adapter binary from being run by hand as if
// it were a normal program.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "VIGIL_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "0b1c8f7e6f3a4d2a9c5e7b1d3f5a7c9e",
}

// pluginSets lists the API versions this SDK serves and dispenses. impl is
// nil on the host side.
func pluginSets(impl Engine) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		1: {PluginName: &enginePlugin{impl: impl}},
	}
}

// enginePlugin binds an Engine to go-plugin's gRPC transport.
type enginePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Engine
}

var _ plugin.GRPCPlugin = (*enginePlugin)(nil)

func (p *enginePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginv1.RegisterEngineServer(s, &engineServer{impl: p.impl})
	return nil
}

func (p *enginePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &engineClient{client: pluginv1.NewEngineClient(c)}, nil
}

// ServeOption configures Serve.
type ServeOption func(*serveConfig)

type serveConfig struct {
	logger      hclog.Logger
	parentWatch time.Duration
	test        *plugin.ServeTestConfig
}

// WithLogger sets the adapter's logger. Default: JSON lines on stderr at
// INFO, which the host relays into its own log.
func WithLogger(l hclog.Logger) ServeOption { return func(c *serveConfig) { c.logger = l } }

// WithParentWatch sets how often the adapter checks that the host process
// that started it is still alive; it exits when the host is gone. Default
// 200ms; 0 turns the check off (for in-process tests).
func WithParentWatch(interval time.Duration) ServeOption {
	return func(c *serveConfig) { c.parentWatch = interval }
}

// WithTestConfig serves in-process for tests instead of over the
// subprocess handshake; see plugin.ServeTestConfig.
func WithTestConfig(tc *plugin.ServeTestConfig) ServeOption {
	return func(c *serveConfig) { c.test = tc }
}

// Serve runs impl as a vigil engine adapter. Call it from the adapter's
// main; it returns when the host shuts the adapter down.
//
// Serve makes the adapter exit when its host dies, even from SIGKILL:
// go-plugin alone leaves such a plugin running. It also ignores SIGTERM, as
// go-plugin ignores SIGINT, because the host decides when the adapter stops.
func Serve(impl Engine, opts ...ServeOption) {
	cfg := serveConfig{parentWatch: 200 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = hclog.New(&hclog.LoggerOptions{
			Name:       "adapter",
			Level:      hclog.Info,
			Output:     os.Stderr,
			JSONFormat: true,
		})
	}
	if cfg.test == nil {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		go func() {
			for range sigs {
				cfg.logger.Debug("ignoring SIGTERM: the host drives shutdown")
			}
		}()
		if cfg.parentWatch > 0 {
			go watchParent(os.Getppid(), cfg.parentWatch, cfg.logger)
		}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(impl),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return plugin.DefaultGRPCServer(append(opts, StreamServerOptions()...))
		},
		Logger: cfg.logger,
		Test:   cfg.test,
	})
}

// watchParent exits the process once it has been re-parented, which on Unix
// means the process that started it has died. Polling getppid works for
// every adapter on every Unix; PR_SET_PDEATHSIG would be Linux-only and tied
// to the parent's thread, not its process.
func watchParent(ppid int, every time.Duration, log hclog.Logger) {
	if ppid <= 1 {
		return // started by init itself: nothing to watch
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if os.Getppid() != ppid {
			log.Error("host process exited; adapter exiting", "host_pid", ppid)
			os.Exit(1)
		}
	}
}

// LaunchConfig configures Launch.
type LaunchConfig struct {
	// Cmd runs the adapter executable. For a built-in adapter it re-runs
	// the host's own executable. Required.
	Cmd *exec.Cmd
	// Logger receives go-plugin's and the adapter's log lines. Default:
	// discarded.
	Logger hclog.Logger
	// StartTimeout bounds the handshake. Default 30s.
	StartTimeout time.Duration
}

// Plugin is a running adapter subprocess.
type Plugin struct {
	// Engine is the adapter, called over gRPC.
	Engine Engine
	// Version is the negotiated vigil.plugin API version.
	Version int

	client *plugin.Client
}

// Launch starts an adapter subprocess with AutoMTLS and returns it ready for
// calls. When ctx ends before the handshake completes, the process is killed
// and Launch returns an error wrapping ctx's. On error no process is left
// running.
func Launch(ctx context.Context, cfg LaunchConfig) (*Plugin, error) {
	if cfg.Cmd == nil {
		return nil, fmt.Errorf("%w: launch config has no command", ErrInvalidArgument)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(nil),
		Cmd:              cfg.Cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  StreamDialOptions(),
		Logger:           logger,
		StartTimeout:     timeout,
	})
	// go-plugin's handshake takes no context: killing the process is what
	// ends it early.
	handshook := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			client.Kill()
		case <-handshook:
		}
	}()
	rpc, err := client.Client()
	close(handshook)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		client.Kill()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("starting adapter %s: %w", cfg.Cmd.Path, ctx.Err())
		}
		return nil, fmt.Errorf("starting adapter %s: %w", cfg.Cmd.Path, err)
	}
	raw, err := rpc.Dispense(PluginName)
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("dispensing adapter %s: %w", cfg.Cmd.Path, err)
	}
	ec, ok := raw.(*engineClient)
	if !ok {
		client.Kill()
		return nil, fmt.Errorf("adapter %s: unexpected plugin type %T", cfg.Cmd.Path, raw)
	}
	ec.exited = client.Exited
	return &Plugin{Engine: ec, Version: client.NegotiatedVersion(), client: client}, nil
}

// Exited reports whether the adapter process has exited.
func (p *Plugin) Exited() bool { return p.client.Exited() }

// Kill stops the adapter: gracefully first, then forcibly after go-plugin's
// 2 s bound. It is idempotent.
func (p *Plugin) Kill() { p.client.Kill() }

// streamWindow is the static HTTP/2 flow-control window of the connections
// that carry token streams. A static window turns off gRPC's BDP estimator,
// which sends a PING for nearly every small message; with one message per
// token that doubles the writes and wake-ups per token on every hop.
const streamWindow = 1 << 20

// StreamDialOptions are the dial options for connections that carry token
// streams (host to adapter, adapter to engine, router to worker).
func StreamDialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(streamWindow)}
}

// StreamServerOptions are the server options for servers of token streams.
func StreamServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(streamWindow)}
}
