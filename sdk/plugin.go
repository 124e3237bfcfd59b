package sdk

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"github.com/vigilhq/vigil/sdk/internal/wire"
	"google.golang.org/grpc"
)

func init() {
	wire.HostPluginSets = func() map[int]plugin.PluginSet { return pluginSets(nil) }
	wire.BindExited = func(raw any, exited func() bool) bool {
		ec, ok := raw.(*engineClient)
		if ok {
			ec.exited = exited
		}
		return ok
	}
}

// pluginSets lists the API versions this SDK serves and dispenses. impl is
// nil on the host side.
func pluginSets(impl Engine) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		1: {wire.PluginName: &enginePlugin{impl: impl}},
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

// WithLogger sets the adapter's logger. Default: Logger(), whose entries
// reach the host's log at their level.
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
// What the adapter logs reaches the host's log: Logger's entries at their
// level; from the moment Serve is called, what the standard log package
// writes (unless it was pointed elsewhere) at INFO; and, once the
// handshake is done, what is written to os.Stdout and os.Stderr at INFO,
// a line at a time (go-plugin carries both to the host).
//
// Serve makes the adapter exit when its host dies, even from SIGKILL:
// go-plugin alone leaves such a plugin running. It also ignores SIGTERM and
// SIGHUP, as go-plugin ignores SIGINT, because the host decides when the
// adapter stops: a signal sent to the host's whole process group (a
// terminal that closes sends SIGHUP, systemd's control-group stop SIGTERM)
// must not end the adapter before the host has drained through it.
func Serve(impl Engine, opts ...ServeOption) {
	cfg := serveConfig{parentWatch: 200 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = Logger()
	}
	if cfg.test == nil {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
		go func() {
			for sig := range sigs {
				cfg.logger.Debug("ignoring the signal: the host drives shutdown", "signal", sig.String())
			}
		}()
		if cfg.parentWatch > 0 {
			go watchParent(os.Getppid(), cfg.parentWatch, cfg.logger)
		}
		captureStdLog(cfg.logger)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: pluginSets(impl),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return plugin.DefaultGRPCServer(append(opts, wire.StreamServerOptions()...))
		},
		Logger: cfg.logger,
		Test:   cfg.test,
	})
}

// captureStdLog sends the standard log package's lines to logger at INFO,
// without their own date and time (logger stamps them), when the package
// still writes to stderr: go-plugin relays plain lines there only at DEBUG.
func captureStdLog(logger hclog.Logger) {
	if log.Writer() != stderr {
		return // the adapter chose where its log goes
	}
	log.SetOutput(&wire.LineLogger{Log: logger, Max: MaxLogLine})
	log.SetFlags(log.Flags() &^ (log.Ldate | log.Ltime | log.Lmicroseconds))
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
