package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Podman is the podman CLI and the variables it runs with (CONTAINERS_CONF
// and the like), added to the driver's environment.
type Podman struct {
	Bin string
	Env []string
}

// podmanTimeout bounds each podman command but `podman run`.
const podmanTimeout = 2 * time.Minute

// Command runs podman with args and returns its combined output, trimmed;
// the error names the command and holds the output.
func (pm Podman) Command(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), podmanTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, pm.Bin, args...)
	cmd.Env = append(os.Environ(), pm.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Container is a Starter that starts a container of Image named Name
// instead of a process: `podman run --rm --network host`, in the
// foreground, so that the Proc's output and exit code are the container's.
// The bin given to Start is the image's entrypoint and goes unused; env
// becomes the container's environment (--env), not podman's. Podman's own
// signal proxy is off: signals go to the container by Kill, as an
// orchestrator sends them.
type Container struct {
	Podman
	Starter Starter
	Image   string
	// Name is the container's name, unique on the machine.
	Name string
}

// Start starts the container through c.Starter and returns at once.
func (c Container) Start(name string, env []string, _ string, args ...string) (*Proc, error) {
	run := []string{"run", "--rm", "--pull", "never", "--network", "host", "--sig-proxy=false", "--name", c.Name}
	for _, kv := range env {
		run = append(run, "--env", kv)
	}
	run = append(append(run, c.Image), args...)
	return c.Starter.Start(name, c.Env, c.Bin, run...)
}

// Kill sends sig (a name, as TERM or KILL) to the container's main
// process: `podman kill --signal`.
func (c Container) Kill(sig string) error {
	_, err := c.Command("kill", "--signal", sig, c.Name)
	return err
}

// Remove removes the container, killing it if it runs; a container gone
// already is no error.
func (c Container) Remove() error {
	_, err := c.Command("rm", "--force", "--ignore", "--time", "0", c.Name)
	return err
}
