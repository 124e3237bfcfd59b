package command

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/adapter"
	"github.com/vigilhq/vigil/host/internal/builtin"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/pluginhost"
)

// adapterFlags are the flags that find, pin and start an engine adapter,
// shared by run and plugin check.
func adapterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "plugin-dir", Value: adapter.DefaultDir, EnvVars: env("PLUGIN_DIR"),
			Usage: "directory of third-party adapters: --engine NAME runs its " + adapter.FilePrefix + "NAME unless NAME is built in; a " +
				adapter.SumsFile + " file there pins them (need not exist)"},
		&cli.StringFlag{Name: "engine-plugin-sha256", EnvVars: env("ENGINE_PLUGIN_SHA256"),
			Usage: "SHA-256 (hex) the third-party adapter executable must have; nothing starts otherwise"},
		&cli.StringSliceFlag{Name: "plugin-env", EnvVars: env("PLUGIN_ENV"),
			Usage: "name of a variable of vigil's environment to pass to the adapter, besides PATH, HOME, TMPDIR, LANG, LC_* and TZ (repeatable; never CONSUL_* or VIGIL_*)"},
		&cli.DurationFlag{Name: "plugin-start-timeout", Value: pluginhost.DefaultStartTimeout, EnvVars: env("PLUGIN_START_TIMEOUT"),
			Usage: "how long the adapter may take to complete the plugin handshake before vigil exits 1"},
	}
}

// adapterConfig is the validated form of adapterFlags.
type adapterConfig struct {
	dir, sha256  string
	env          []string // names of the variables passed on
	startTimeout time.Duration
}

var (
	sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func parseAdapter(c *cli.Context) (adapterConfig, error) {
	a := adapterConfig{dir: c.String("plugin-dir"), sha256: strings.ToLower(c.String("engine-plugin-sha256")),
		env: c.StringSlice("plugin-env"), startTimeout: c.Duration("plugin-start-timeout")}
	if a.sha256 != "" && !sha256Hex.MatchString(a.sha256) {
		return a, usageErrorf("--engine-plugin-sha256 %q: want 64 hex digits, as sha256sum prints", a.sha256)
	}
	for _, name := range a.env {
		if !envName.MatchString(name) {
			return a, usageErrorf("--plugin-env %q: want a variable's name (letters, digits and _)", name)
		}
		if adapter.Reserved(name) {
			return a, usageErrorf("--plugin-env %q: vigil's own variables (CONSUL_*, VIGIL_*) are never passed to an adapter", name)
		}
	}
	if a.startTimeout < time.Millisecond {
		return a, usageErrorf("--plugin-start-timeout %s: must be a positive duration such as 30s", a.startTimeout)
	}
	// The adapter makes its go-plugin socket there; if it cannot, it exits
	// before the handshake, which would read as no adapter at all.
	if err := checkSocketDir(adapter.Env(os.Environ(), a.env)); err != nil {
		return a, err
	}
	return a, nil
}

// checkSocketDir refuses a directory for the adapter's Unix socket (see
// adapter.SocketDir) too long for a socket path, or where no file can be
// made, naming the variable that chose it: a container image without a
// writable /tmp, say.
func checkSocketDir(env []string) error {
	if err := pluginhost.CheckSocketPath(env); err != nil {
		return usageErrorf("%v", err)
	}
	dir, from := adapter.SocketDir(env)
	err := adapter.CheckWritable(dir)
	if err == nil {
		return nil
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err
	}
	where := fmt.Sprintf("%s %q", from, dir)
	if from == "" {
		where = dir + " (TMPDIR unset)"
	}
	return usageErrorf("%s: the engine adapter makes its Unix socket there and cannot: %v; set TMPDIR to a writable directory (an image needs a writable /tmp)",
		where, err)
}

// adapterSource is the adapter vigil runs: built in, or an executable.
type adapterSource struct {
	// engine is the engine asked for; "": the name the adapter reports.
	engine string
	// path is the executable; "" for a built-in adapter.
	path string
	// label names the adapter in messages as the user chose it: the flag
	// or argument and its value.
	label string
	// fromDir: found in the plugin directory by --engine.
	fromDir bool
	// sum is the executable's SHA-256.
	sum string
	// shadowed is a plugin-directory adapter ignored because the engine
	// is built in.
	shadowed string
}

// findAdapter finds the adapter for engine: the executable plugin
// (--engine-plugin; engine "" takes the name it reports), else a built-in
// adapter, else the plugin directory's. Built-in engines come first: the
// plugin directory's adapter of the same name runs only when
// --engine-plugin names it.
func findAdapter(engine, plugin string, a adapterConfig) (adapterSource, error) {
	if plugin != "" {
		src, err := findPlugin(plugin, fmt.Sprintf("--engine-plugin %q", plugin), a)
		src.engine = engine
		return src, err
	}
	dirPath, found, err := adapter.InDir(a.dir, engine)
	if builtin.Has(engine) {
		if a.sha256 != "" {
			return adapterSource{}, usageErrorf("--engine-plugin-sha256: pins a third-party adapter, and --engine %s is built into vigil", engine)
		}
		src := adapterSource{engine: engine, label: fmt.Sprintf("--engine %q", engine)}
		if found {
			src.shadowed = dirPath
		}
		return src, nil
	}
	if err != nil {
		return adapterSource{}, usageErrorf("--plugin-dir %q: %v", a.dir, err)
	}
	if !found {
		return adapterSource{}, usageErrorf("--engine %q: unknown engine; built-in engines: %s, and --plugin-dir %q has no %s (or give an adapter executable with --engine-plugin)",
			engine, strings.Join(builtin.Names(), ", "), a.dir, filepath.Base(dirPath))
	}
	src, err := findPlugin(dirPath, fmt.Sprintf("--engine %q (%s)", engine, dirPath), a)
	src.engine, src.fromDir = engine, true
	return src, err
}

// findPlugin checks the executable at path, which label names, and its
// pins.
func findPlugin(path, label string, a adapterConfig) (adapterSource, error) {
	src := adapterSource{path: path, label: label}
	if _, err := exec.LookPath(path); err != nil {
		return src, usageErrorf("%s: not an executable file: %v", label, err)
	}
	var err error
	src.sum, err = checkPins(src, a)
	return src, err
}

// checkPins returns the SHA-256 of src's executable, once it matches
// --engine-plugin-sha256 when set, and the plugin directory's SHA256SUMS
// when src is in that directory and it has one (which must list src).
// Between this check and the exec, the file could be swapped: the
// directory is meant to be as trusted as vigil's own executable.
func checkPins(src adapterSource, a adapterConfig) (string, error) {
	got, err := adapter.Sum(src.path)
	if err != nil {
		return "", usageErrorf("%s: %v", src.label, err)
	}
	if a.sha256 != "" && got != a.sha256 {
		return "", usageErrorf("--engine-plugin-sha256: %s has SHA-256 %s, want %s", src.path, got, a.sha256)
	}
	dir, _ := filepath.Abs(a.dir)
	if exe, _ := filepath.Abs(src.path); filepath.Dir(exe) != dir {
		return got, nil
	}
	pins, ok, err := adapter.Pins(a.dir)
	if err != nil {
		return "", usageErrorf("--plugin-dir %q: %v", a.dir, err)
	}
	want, listed := pins[filepath.Base(src.path)]
	switch {
	case !ok:
		return got, nil
	case !listed:
		return "", usageErrorf("--plugin-dir %q: %s does not list %s, and a pinned plugin directory runs only the adapters it lists",
			a.dir, adapter.SumsFile, filepath.Base(src.path))
	case want != got:
		return "", usageErrorf("--plugin-dir %q: %s has SHA-256 %s, want %s (from %s)", a.dir, src.path, got, want, adapter.SumsFile)
	}
	return got, nil
}

// name names the adapter's lines in vigil's log.
func (s adapterSource) name() string {
	if s.engine != "" {
		return s.engine
	}
	return strings.TrimPrefix(filepath.Base(s.path), adapter.FilePrefix)
}

// logSelected logs which adapter runs, and a plugin-directory adapter
// that a built-in one shadows.
func (s adapterSource) logSelected(log hclog.Logger) {
	if s.shadowed != "" {
		log.Warn("the plugin directory's adapter is ignored: the engine is built into vigil; name it with --engine-plugin to run it",
			"engine", s.engine, "ignored", s.shadowed)
	}
	switch {
	case s.path == "":
		log.Info("engine adapter selected", "engine", s.engine, "adapter", "built in")
	case s.engine == "":
		log.Info("engine adapter selected", "adapter", s.path, "sha256", s.sum)
	default:
		log.Info("engine adapter selected", "engine", s.engine, "adapter", s.path, "sha256", s.sum)
	}
}

// checkName refuses an adapter that reports another engine than the one
// asked for, or a name that discovery cannot publish.
func (s adapterSource) checkName(info sdk.AdapterInfo) error {
	switch {
	case !validName(info.Name):
		return &configError{msg: fmt.Sprintf("%s: the adapter reports the engine name %q, which discovery cannot publish: %s", s.label, info.Name, nameRule)}
	case s.engine == "" || info.Name == s.engine:
		return nil
	case s.fromDir:
		return &configError{msg: fmt.Sprintf("%s: the adapter reports the engine %q; %s in a plugin directory must be the adapter of %s",
			s.label, info.Name, filepath.Base(s.path), s.engine)}
	default:
		return &configError{msg: fmt.Sprintf("--engine %q: the adapter %s reports the engine %q; leave --engine out to take the adapter's name",
			s.engine, s.path, info.Name)}
	}
}

// launchAdapter starts src's adapter with the scrubbed environment.
// go-plugin's handshake cannot be cut short (its Kill waits for the
// handshake to end), so the process is made to be killed when ctx ends
// before Launch has returned: a stop while the adapter launches then ends
// the launch at once and leaves no process. An executable that is no
// adapter of this vigil's is a configuration error.
func launchAdapter(ctx context.Context, src adapterSource, a adapterConfig, log hclog.Logger) (*pluginhost.Plugin, error) {
	abort, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	defer stop() // once launched, the adapter outlives ctx
	env := adapter.Env(os.Environ(), a.env)
	var cmd *exec.Cmd
	if src.path != "" {
		cmd = exec.CommandContext(abort, src.path)
		cmd.Env = env
	} else {
		var err error
		if cmd, err = builtin.Command(abort, src.engine, env); err != nil {
			return nil, err
		}
	}
	p, err := pluginhost.Launch(ctx, pluginhost.LaunchConfig{Cmd: cmd, Name: src.name(), Logger: log.Named("adapter"), StartTimeout: a.startTimeout})
	if errors.Is(err, pluginhost.ErrNotPlugin) || errors.Is(err, pluginhost.ErrProtocolVersion) || errors.Is(err, pluginhost.ErrSocketPath) {
		return nil, fmt.Errorf("%w: %s: %w", outcome.ErrConfig, src.label, err)
	}
	return p, err
}
