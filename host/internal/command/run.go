package command

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/adapter"
	"github.com/vigilhq/vigil/host/internal/builtin"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/consul"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
	"github.com/vigilhq/vigil/host/internal/endpoint"
	"github.com/vigilhq/vigil/host/internal/outparse"
	"github.com/vigilhq/vigil/host/internal/supervisor"
	"github.com/vigilhq/vigil/host/internal/tlsconfig"
	"github.com/vigilhq/vigil/sdk"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "supervise an engine: register the worker while it serves, exit 1 when it is lost (--on-loss=wait: wait for it again)",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "engine", Value: "vllm", EnvVars: env("ENGINE"),
				Usage: "engine name: a built-in adapter (" + strings.Join(builtin.Names(), ", ") + "), else --plugin-dir's " + adapter.FilePrefix + "NAME; with --engine-plugin, the name its adapter must report (default: the name it reports)"},
			&cli.StringFlag{Name: "engine-plugin", EnvVars: env("ENGINE_PLUGIN"),
				Usage: "path of a third-party adapter executable (built with the vigil sdk) to run instead of a built-in one"},
			&cli.StringFlag{Name: "engine-addr", Value: "127.0.0.1:50051", EnvVars: env("ENGINE_ADDR"),
				Usage: "the engine's gRPC address, host:port"},
			&cli.StringSliceFlag{Name: "engine-option", EnvVars: env("ENGINE_OPTION"),
				Usage: "engine-specific adapter option, key=value (repeatable)"},
			&cli.StringFlag{Name: "served-model-name", EnvVars: env("SERVED_MODEL_NAME"),
				Usage: "model name clients use, registered and required of requests in place of the one the engine reports (for engines that report only a path); default: the engine's"},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8470", EnvVars: env("LISTEN"),
				Usage: "address of the worker endpoint, host:port"},
			&cli.StringFlag{Name: "advertise-addr", EnvVars: env("ADVERTISE_ADDR"),
				Usage: "address published in discovery, host:port (default: --listen, which must then not be a wildcard address)"},
			&cli.StringFlag{Name: "worker-id", EnvVars: env("WORKER_ID"),
				Usage: "worker id, stable across restarts and unique per service: two vigils given one id are refused (the later exits 78) (default: NOMAD_ALLOC_ID-NOMAD_TASK_NAME under Nomad, else host name-listen host-listen port, the listen host left out when it is a wildcard address)"},
			&cli.IntFlag{Name: "max-inflight", Value: endpoint.DefaultMaxInflight, EnvVars: env("MAX_INFLIGHT"),
				Usage: "most engine requests in flight at once, a request counting its n; more are refused with RESOURCE_EXHAUSTED"},
			&cli.DurationFlag{Name: "startup-deadline", Value: sdk.DefaultStartupDeadline, EnvVars: env("STARTUP_DEADLINE"),
				Usage: "how long to wait for the engine to serve before exiting 1"},
			&cli.DurationFlag{Name: "check-ttl", Value: 5 * time.Second, EnvVars: env("CHECK_TTL"),
				Usage: "TTL of the registration's health check; renewed every third of it"},
			&cli.DurationFlag{Name: "deregister-after", Value: consul.MinDeregisterAfter, EnvVars: env("DEREGISTER_AFTER"),
				Usage: "consul removes a worker whose check stayed critical this long (minimum 1m)"},
			&cli.DurationFlag{Name: "health-interval", Value: sdk.DefaultHealthInterval, EnvVars: env("HEALTH_INTERVAL"),
				Usage: "time between engine liveness checks"},
			&cli.DurationFlag{Name: "health-timeout", Value: sdk.DefaultHealthTimeout, EnvVars: env("HEALTH_TIMEOUT"),
				Usage: "deadline of one engine liveness check"},
			&cli.IntFlag{Name: "health-failures", Value: sdk.DefaultHealthFailures, EnvVars: env("HEALTH_FAILURES"),
				Usage: "consecutive failed liveness checks after which the engine is lost"},
			&cli.DurationFlag{Name: "health-busy-timeout", Value: sdk.DefaultBusyTimeout, EnvVars: env("HEALTH_BUSY_TIMEOUT"),
				Usage: "how long an engine whose liveness checks time out while its connection still answers an HTTP/2 PING is busy, not failed; 0: off, every timed-out check is a failure"},
			&cli.DurationFlag{Name: "health-confirm", EnvVars: env("HEALTH_CONFIRM"),
				Usage: "how long a liveness status other than SERVING must hold before the engine is lost, to ride out health blips; 0: at once"},
			&cli.DurationFlag{Name: "engine-retry-max", Value: sdk.DefaultRetryMax, EnvVars: env("ENGINE_RETRY_MAX"),
				Usage: "cap of the retry backoff while waiting for the engine: at most this long between connection attempts"},
			&cli.StringFlag{Name: "tokenizer-dir", EnvVars: env("TOKENIZER_DIR"),
				Usage: "directory of the model's Hugging Face tokenizer.json (and tokenizer_config.json, for its chat template): vigil tokenizes text and chat prompts, sends every engine token ids and detokenizes the output itself (default: the model path the engine reports, when it is a local directory holding tokenizer.json)"},
			&cli.StringFlag{Name: "chat-template", EnvVars: env("CHAT_TEMPLATE"),
				Usage: "Jinja chat template file used in place of tokenizer_config.json's chat_template, as vLLM's --chat-template"},
			&cli.StringFlag{Name: "reasoning-parser", EnvVars: env("REASONING_PARSER"),
				Usage: "parser of the model's reasoning in chat output, to reasoning_content: " + strings.Join(outparse.ReasoningParsers(), ", ") +
					" (default: the engine's, where it reports one, as vLLM's ModelInfo; else told from the chat template where unambiguous; none: off)"},
			&cli.StringFlag{Name: "tool-call-parser", EnvVars: env("TOOL_CALL_PARSER"),
				Usage: "parser of the model's tool calls in chat output, to tool_calls: " + strings.Join(outparse.ToolCallParsers(), ", ") +
					" (default: the engine's, where it reports one; else told from the chat template where unambiguous; none: off, and tools are refused)"},
			dryRunFlag("the adapter found and its pins checked, a built-in engine's --engine-option checked, a third-party adapter started for its handshake and Info only, the file registry directory written to, the tokenizer loaded"),
		}, append(append(append(lossFlags(), adapterFlags()...), discoveryFlags("service name the worker is registered under")...), metricsFlags()...)...),
			append(tlsFlags("the worker endpoint"), logFlags()...)...),
		Action:       runAction,
		OnUsageError: onUsageError,
	}
}

// lossFlags are run's flags for what follows a stop or a loss: the drains'
// bounds and --on-loss.
func lossFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "grace-period", Value: 5 * time.Second, EnvVars: env("GRACE_PERIOD"),
			Usage: "how long requests in flight may finish after the worker is withdrawn"},
		&cli.DurationFlag{Name: "drain-timeout", Value: supervisor.DefaultDrainTimeout, EnvVars: env("DRAIN_TIMEOUT"),
			Usage: "how long requests in flight may run on after an engine that drains on purpose (vLLM's shutdown grace period, SGLang's runtime) stopped serving; vigil exits 1 after the last (0: a drain is a loss: the grace period)"},
		&cli.DurationFlag{Name: "stall-timeout", Value: supervisor.DefaultStallTimeout, EnvVars: env("STALL_TIMEOUT"),
			Usage: "while the engine drains on purpose, cut a request that has sent no token this long"},
		&cli.StringFlag{Name: "on-loss", Value: onLossExit, EnvVars: env("ON_LOSS"),
			Usage: "what to do when the engine is lost (its adapter dead or hung, or its drain on purpose ended): exit (exit 1, for the supervisor to restart vigil) or wait (withdraw, drain, restart the adapter and wait for the engine again under --startup-deadline; liveness stays SERVING)"},
		&cli.DurationFlag{Name: "shutdown-delay", EnvVars: env("SHUTDOWN_DELAY"),
			Usage: "after SIGTERM, keep admitting requests this long after the withdrawal while the engine serves, for load balancers that learn of it late"},
	}
}

// defaultRegistryDir is the file registry under the XDG state directory.
func defaultRegistryDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "vigil", "registry")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" && h != "/" {
		return filepath.Join(h, ".local", "state", "vigil", "registry")
	}
	return filepath.Join(os.TempDir(), "vigil", "registry")
}

// runConfig is the validated form of run's flags.
type runConfig struct {
	discoveryConfig
	adapter              adapterConfig
	log                  logConfig
	engine, enginePlugin string // engine "" with enginePlugin: the name it reports
	start                sdk.StartRequest
	listen               string
	advHost              string
	advPort              int
	workerID             string
	grace, ttl, deregAft time.Duration
	shutdownDelay        time.Duration
	drainTimeout         time.Duration // --drain-timeout
	waitOnLoss           bool          // --on-loss wait
	stallTimeout         time.Duration // --stall-timeout
	maxInflight          int
	servedModelName      string // "": the engine's own
	tokenizerDir         string // "": the engine's model path, if a directory
	chatTemplate         string // "": the model's own
	// The parsers' names; "": the engine's, else the template's.
	reasoningParser, toolCallParser string
	metrics                         metricsConfig
	tls                             tlsconfig.ServerFiles
}

func runAction(c *cli.Context) error {
	signals, ignored, stop := subscribeSignals()
	defer stop()
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := parseRun(c)
	if err != nil {
		return err
	}
	src, err := preflight(cfg)
	if err != nil {
		return err
	}
	log := cfg.log.logger(c.App.ErrWriter)
	src.logSelected(log)
	tok, err := loadTokenizer(cfg)
	if err != nil {
		return err
	}
	if tok != nil {
		log.Info("tokenizer loaded", "tokenizer_dir", cfg.tokenizerDir, "chat_template", tok.HasChatTemplate())
	}
	logIgnored(log, ignored)
	advertise := net.JoinHostPort(cfg.advHost, strconv.Itoa(cfg.advPort))
	warnConsul(cfg, advertise, log)

	registry, err := newRegistry(cfg)
	if err != nil {
		return err
	}
	srvTLS, err := loadServerTLS(cfg.tls, log)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return dryRunEnd(c, cfg, src, log, withTokenizer(runResolved(cfg, src, registry), cfg, tok))
	}
	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return exit(fmt.Errorf("--listen %s: %w", cfg.listen, err))
	}
	ep := endpoint.New(lis, cfg.maxInflight, log.Named("endpoint"), grpcCreds(srvTLS)...)
	defer ep.Close()
	go func() {
		if err := ep.Serve(); err != nil {
			log.Error("worker endpoint failed", "error", err)
		}
	}()
	log.Info("worker endpoint listening", "listen", lis.Addr().String(), "advertise", advertise,
		"tls", srvTLS != nil, "mtls", cfg.tls.ClientCAFile != "", "service", cfg.service, "worker_id", cfg.workerID, "registry", registry.String())
	lc := lifecycleConfig(cfg, src, registry, ep, log)
	lc.Tokenizer = workerTokenizer(cfg, tok, ep.Wrap, log)
	stopMetrics, err := serveRunMetrics(cfg.metrics, &lc, ep, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	return exitLogged(log, supervisor.Run(c.Context, lc, signals))
}

// warnConsul logs what a valid configuration may still get wrong in
// Consul: a service name its DNS interface cannot resolve, and a loopback
// address that only clients on this host reach.
func warnConsul(cfg runConfig, advertise string, log hclog.Logger) {
	if cfg.discovery != "consul" {
		return
	}
	if !dnsLabel(cfg.service) {
		log.Warn("--service-name is not a DNS label (letters, digits and - only, at most 63, not beginning or ending with -): Consul's DNS interface cannot resolve it; its HTTP API can",
			"service", cfg.service)
	}
	if ip := net.ParseIP(cfg.advHost); cfg.advHost == "localhost" || ip != nil && ip.IsLoopback() {
		log.Warn("advertising a loopback address in Consul: only clients on this host can reach the worker; set --advertise-addr",
			"advertise", advertise)
	}
}

// lifecycleConfig is the supervisor's configuration for run's.
func lifecycleConfig(cfg runConfig, src adapterSource, registry discovery.Registry, ep *endpoint.Server, log hclog.Logger) supervisor.Config {
	announcer := discovery.NewAnnouncer(registry, log)
	// The registration health service follows what the registry holds.
	announcer.OnState(func(st discovery.RegistrationState) { ep.Registered(st == discovery.Registered) })
	// A router that means the worker registered before at this address is refused.
	ep.SetWorkerID(cfg.workerID)
	return supervisor.Config{
		Launch: func(ctx context.Context) (supervisor.Adapter, error) {
			p, err := launchAdapter(ctx, src, cfg.adapter, log)
			if err != nil {
				return supervisor.Adapter{}, err
			}
			return supervisor.FromPlugin(p), nil
		},
		Start: cfg.start,
		Registration: discovery.Registration{
			Service: cfg.service, WorkerID: cfg.workerID, Engine: cfg.engine,
			Address: cfg.advHost, Port: cfg.advPort,
		},
		ServedModelName: cfg.servedModelName,
		Capabilities:    ep.Capabilities,
		Announcer:       announcer,
		Endpoint:        ep,
		GracePeriod:     cfg.grace,
		DrainTimeout:    cfg.drainTimeout,
		WaitOnLoss:      cfg.waitOnLoss,
		StallTimeout:    cfg.stallTimeout,
		ShutdownDelay:   cfg.shutdownDelay,
		ExplainRejected: namingFlags,
		CheckAdapter:    src.checkName,
		Logger:          log,
	}
}

// parseRun validates run's flags; every error names the flag and what it
// accepts. It has no side effects: preflight makes the checks that touch
// the system.
// parseTokenizer reads --tokenizer-dir, --chat-template and the output
// parsers, checking the parsers' names.
func parseTokenizer(c *cli.Context, cfg *runConfig) error {
	cfg.tokenizerDir, cfg.chatTemplate = c.String("tokenizer-dir"), c.String("chat-template")
	cfg.reasoningParser, cfg.toolCallParser = c.String("reasoning-parser"), c.String("tool-call-parser")
	if err := outparse.Check("--reasoning-parser", cfg.reasoningParser, false); err != nil {
		return usageErrorf("%v", err)
	}
	if err := outparse.Check("--tool-call-parser", cfg.toolCallParser, true); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

func parseRun(c *cli.Context) (runConfig, error) {
	cfg := runConfig{
		engine:        c.String("engine"),
		enginePlugin:  c.String("engine-plugin"),
		workerID:      c.String("worker-id"),
		grace:         c.Duration("grace-period"),
		ttl:           c.Duration("check-ttl"),
		deregAft:      c.Duration("deregister-after"),
		shutdownDelay: c.Duration("shutdown-delay"),
		maxInflight:   c.Int("max-inflight"),
		drainTimeout:  c.Duration("drain-timeout"), stallTimeout: c.Duration("stall-timeout"),
		servedModelName: c.String("served-model-name"),
	}
	if err := parseTokenizer(c, &cfg); err != nil {
		return cfg, err
	}
	if cfg.enginePlugin != "" && !c.IsSet("engine") {
		cfg.engine = ""
	}
	if cfg.engine != "" && !validName(cfg.engine) {
		return cfg, usageErrorf("--engine %q: %s", cfg.engine, nameRule)
	}
	var err error
	if cfg.adapter, err = parseAdapter(c); err != nil {
		return cfg, err
	}
	if cfg.start, err = parseStart(c); err != nil {
		return cfg, err
	}
	if err := checkModelName(cfg.servedModelName); err != nil {
		return cfg, usageErrorf("--served-model-name %q: %v", cfg.servedModelName, err)
	}
	if cfg.waitOnLoss, err = parseOnLoss(c.String("on-loss")); err != nil {
		return cfg, err
	}
	if cfg.maxInflight < 1 {
		return cfg, usageErrorf("--max-inflight %d: must be 1 or more", cfg.maxInflight)
	}
	lhost, lport, err := parseAddresses(c, &cfg)
	if err != nil {
		return cfg, err
	}
	if cfg.discoveryConfig, err = parseDiscovery(c); err != nil {
		return cfg, err
	}
	if cfg.metrics, err = parseMetrics(c); err != nil {
		return cfg, err
	}
	if cfg.workerID == "" {
		cfg.workerID = defaultWorkerID(lhost, lport)
	}
	if err := checkWorkerID(cfg.workerID, cfg.discovery); err != nil {
		return cfg, err
	}
	if cfg.tls, err = parseTLS(c); err != nil {
		return cfg, err
	}
	cfg.log, err = parseLog(c)
	return cfg, err
}

// The values of --on-loss.
const (
	onLossExit = "exit" // the seed's contract: the supervisor restarts vigil
	onLossWait = "wait" // vigil waits for the engine again
)

// parseOnLoss reads --on-loss: whether vigil waits for the engine again
// after losing it.
func parseOnLoss(v string) (wait bool, err error) {
	switch v {
	case onLossExit:
		return false, nil
	case onLossWait:
		return true, nil
	}
	return false, usageErrorf("--on-loss %q: want %s or %s", v, onLossExit, onLossWait)
}

// checkWorkerID says what is wrong with a --worker-id under --discovery d,
// if anything.
func checkWorkerID(id, d string) error {
	switch {
	case !validName(id):
		return usageErrorf("--worker-id %q: %s", id, nameRule)
	case len(id) > discovery.MaxMetaValue:
		return usageErrorf("--worker-id %.40q...: %d bytes long, want at most %d (the registry's limit on a metadata value)",
			id, len(id), discovery.MaxMetaValue)
	case d == "file" && len(id) > file.MaxWorkerID:
		return usageErrorf("--worker-id %.40q...: %d bytes long, want at most %d with --discovery file (the record's file name holds at most 255 bytes)",
			id, len(id), file.MaxWorkerID)
	}
	return nil
}

// parseStart validates what the adapter's Start is given: the engine
// address, the engine options, the bounds and the health policy.
func parseStart(c *cli.Context) (sdk.StartRequest, error) {
	if _, _, err := splitHostPort("engine-addr", c.String("engine-addr")); err != nil {
		return sdk.StartRequest{}, err
	}
	options, err := parseEngineOptions(c)
	if err != nil {
		return sdk.StartRequest{}, err
	}

	for _, d := range []struct {
		flag string
		min  time.Duration
	}{
		{"grace-period", 0}, {"shutdown-delay", 0}, {"startup-deadline", time.Nanosecond}, {"check-ttl", time.Second},
		{"drain-timeout", 0}, {"stall-timeout", time.Nanosecond},
		{"deregister-after", consul.MinDeregisterAfter}, {"health-interval", time.Millisecond},
		{"health-timeout", time.Millisecond}, {"engine-retry-max", time.Millisecond},
		{"health-busy-timeout", 0}, {"health-confirm", 0},
	} {
		if v := c.Duration(d.flag); v < d.min {
			if d.min <= time.Nanosecond {
				return sdk.StartRequest{}, usageErrorf("--%s %s: must be a positive duration such as 30s or 5m", d.flag, v)
			}
			return sdk.StartRequest{}, usageErrorf("--%s %s: must be a duration of at least %s", d.flag, v, d.min)
		}
	}
	if n := c.Int("health-failures"); n < 1 {
		return sdk.StartRequest{}, usageErrorf("--health-failures %d: must be 1 or more", n)
	}
	return sdk.StartRequest{
		EngineAddr:      c.String("engine-addr"),
		StartupDeadline: c.Duration("startup-deadline"),
		Health: sdk.HealthPolicy{
			Interval: c.Duration("health-interval"),
			Timeout:  c.Duration("health-timeout"),
			Failures: c.Int("health-failures"),
			RetryMax: c.Duration("engine-retry-max"),
			Confirm:  c.Duration("health-confirm"),
			// The flag's 0 is off; the policy's 0 is the default.
			BusyTimeout: cmp.Or(c.Duration("health-busy-timeout"), -1),
		},
		Options: options,
	}, nil
}

// parseEngineOptions reads --engine-option's key=value pairs; nil when
// there are none.
func parseEngineOptions(c *cli.Context) (map[string]string, error) {
	var options map[string]string
	for _, kv := range c.StringSlice("engine-option") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--engine-option %q: want key=value", kv)
		}
		if options == nil {
			options = map[string]string{}
		}
		options[k] = v
	}
	return options, nil
}

// parseAddresses validates --listen and --advertise-addr into cfg (the
// advertised address is --listen's when --advertise-addr is unset) and
// returns the listen host and port.
func parseAddresses(c *cli.Context, cfg *runConfig) (lhost string, lport int, err error) {
	cfg.listen = c.String("listen")
	lhost, lport, err = splitHostPort("listen", cfg.listen)
	if err != nil {
		return "", 0, err
	}
	adv := c.String("advertise-addr")
	if adv == "" {
		if isWildcard(lhost) {
			return "", 0, usageErrorf("--listen %q is a wildcard address, which discovery cannot publish: set --advertise-addr host:port", cfg.listen)
		}
		if lport == 0 {
			return "", 0, usageErrorf("--listen %q has port 0, which discovery cannot publish: choose a port or set --advertise-addr", cfg.listen)
		}
		cfg.advHost, cfg.advPort = lhost, lport
		return lhost, lport, nil
	}
	if cfg.advHost, cfg.advPort, err = splitHostPort("advertise-addr", adv); err != nil {
		return "", 0, err
	}
	if isWildcard(cfg.advHost) || cfg.advPort == 0 {
		return "", 0, usageErrorf("--advertise-addr %q: want a reachable host:port, not a wildcard address or port 0", adv)
	}
	return lhost, lport, nil
}

// preflight makes the checks of run's configuration that touch the
// system: the adapter is found and its executable checked against its
// pins, and the file registry directory created and written to. What they
// find is a configuration error too, found before anything starts.
func preflight(cfg runConfig) (adapterSource, error) {
	src, err := findAdapter(cfg.engine, cfg.enginePlugin, cfg.adapter)
	if err != nil {
		return src, err
	}
	if cfg.discovery == "file" {
		if err := file.CheckWritable(cfg.registryDir, cfg.service); err != nil {
			return src, usageErrorf("--registry-dir %q: cannot write worker records there: %v", cfg.registryDir, err)
		}
	}
	return src, nil
}

// splitHostPort parses host:port for flag, with a port from 0 to 65535.
func splitHostPort(flag, addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, usageErrorf("--%s %q: want host:port, such as 127.0.0.1:8470", flag, addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, usageErrorf("--%s %q: port must be a number from 0 to 65535", flag, addr)
	}
	return host, port, nil
}

func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// defaultWorkerID is stable across restarts of the same task and unique
// per listen address: the Nomad allocation and task when run by Nomad,
// else the host name, the listen host and the port. Two vigils on one host
// can share a port on different addresses (127.0.0.1:P and 127.0.0.2:P),
// never on a wildcard address, whose port alone is then unique.
func defaultWorkerID(listenHost string, port int) string {
	if alloc := os.Getenv("NOMAD_ALLOC_ID"); alloc != "" {
		if task := os.Getenv("NOMAD_TASK_NAME"); task != "" {
			return alloc + "-" + task
		}
		return alloc
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	if !isWildcard(listenHost) {
		host += "-" + listenHost
	}
	// A worker id is a Consul id and a file name: what the name rule does
	// not allow (an IPv6 zone's %, say) becomes -.
	return strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._:-", r)) {
			return r
		}
		return '-'
	}, host+"-"+strconv.Itoa(port))
}

// dnsLabel reports whether s is a DNS label (RFC 1123), as Consul's DNS
// interface needs a service name to be to resolve <name>.service.consul.
func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// maxModelName is the longest --served-model-name, in bytes: Consul refuses
// meta values longer than 512, and the name is the meta "model".
const maxModelName = discovery.MaxMetaValue

// checkModelName says what is wrong with a --served-model-name, if
// anything. Empty is allowed (the flag is unset: the engine's own name);
// a name clients cannot send back exactly is not: one that is blank, has
// white space at either end, or holds control characters.
func checkModelName(name string) error {
	switch {
	case name == "":
		return nil
	case strings.TrimSpace(name) == "":
		return errors.New("must not be blank; leave the flag out to use the engine's own name")
	case strings.TrimSpace(name) != name:
		return errors.New("must not begin or end with white space")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return errors.New("must not contain control characters")
	case len(name) > maxModelName:
		return fmt.Errorf("%d bytes long, want at most %d (Consul's limit on a meta value)", len(name), maxModelName)
	}
	return nil
}
