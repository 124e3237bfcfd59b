package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"gopkg.in/yaml.v3"
)

// kubernetesRecipe is the Kubernetes recipe, relative to this package.
const kubernetesRecipe = "../deploy/kubernetes/vigil.yaml"

// engineContainer is the part of the recipe's Deployment this test reads.
type engineContainer struct {
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name      string
					Lifecycle struct {
						PreStop struct {
							Exec struct{ Command []string }
						} `yaml:"preStop"`
					}
				}
			}
		}
	}
}

// preStopCommand returns the engine container's preStop command.
func preStopCommand(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(kubernetesRecipe)
	if err != nil {
		t.Fatal(err)
	}
	var d engineContainer
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", kubernetesRecipe, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "engine" {
			if cmd := c.Lifecycle.PreStop.Exec.Command; len(cmd) > 0 {
				return cmd
			}
		}
	}
	t.Fatalf("%s: no engine container with a preStop exec command", kubernetesRecipe)
	return nil
}

// TestKubernetesPreStop runs the Kubernetes recipe's engine preStop hook
// as the kubelet would, in a process namespace shared with vigil (a PID
// namespace whose init, as the Pod's pause container, is a shell that
// started vigil, and outlives it): it makes vigil withdraw the worker and drain, and
// returns only once vigil has exited 0, so that the engine, stopped after
// it, serves until then. Needs root, for the namespace.
func TestKubernetesPreStop(t *testing.T) {
	skipShort(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to make a PID namespace")
	}
	unshare, err1 := exec.LookPath("unshare")
	nsenter, err2 := exec.LookPath("nsenter")
	if err1 != nil || err2 != nil {
		t.Skipf("needs unshare and nsenter (util-linux): %v, %v", err1, err2)
	}
	t.Parallel()
	preStop := preStopCommand(t)
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	const shutdownDelay = time.Second
	pod := startProcEnv(t, "pod", c.env(), unshare, "--pid", "--fork", "--mount-proc", "--",
		// The init outlives vigil, as the pause container does: an init's
		// exit would kill the hook too.
		"/bin/sh", "-c", `"$0" "$@" & wait $!; echo "vigil exited $?"; exec sleep 600`,
		vigilBin, "run", "--engine-addr="+m.GRPC, "--discovery=consul", "--service-name="+svc,
		"--listen="+addr(freePort(t)), "--worker-id=llm-vllm-7d9f8-x2x4q", "--plugin-env=GORACE",
		"--grace-period=5s", "--shutdown-delay="+shutdownDelay.String())
	registeredWith(t, c, svc, m.InstanceID)
	inits := children(pod.pid())
	if len(inits) != 1 {
		t.Fatalf("unshare (pid %d) has children %v, want the namespace's init", pod.pid(), inits)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	withdrawn := c.Observe(ctx, svc, count(0))
	// The kubelet bounds the hook by terminationGracePeriodSeconds; here
	// vigil's shutdown budget (8s) and a margin.
	hookCtx, cancelHook := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelHook()
	hook := exec.CommandContext(hookCtx, nsenter, append([]string{"--target", strconv.Itoa(inits[0]), "--pid", "--mount", "--"}, preStop...)...)
	// The hook's shell, inside the namespace, outlives a killed nsenter
	// and holds its output open.
	hook.WaitDelay = time.Second
	start := time.Now()
	out, err := hook.CombinedOutput()
	returned := time.Now()
	if hookCtx.Err() != nil {
		t.Fatalf("the preStop hook did not return within 30s (vigil exited 0: %v)\n%s", pod.findLine("exiting: code=0") != "", out)
	}
	if err != nil {
		t.Fatalf("the preStop hook failed: %v\n%s", err, out)
	}
	if pod.findLine("exiting: code=0") == "" {
		t.Fatalf("the preStop hook returned after %s, before vigil exited 0; vigil's last lines:\n%s",
			returned.Sub(start).Round(time.Millisecond), pod.Tail(10))
	}
	at, err := withdrawn.Wait()
	if err != nil {
		t.Fatalf("the worker was not withdrawn: %v", err)
	}
	if !at.Before(returned) {
		t.Errorf("the worker was withdrawn at %s, after the preStop hook returned", at.Sub(start))
	}
	if took := returned.Sub(start); took < shutdownDelay {
		t.Errorf("the preStop hook returned after %s, within vigil's shutdown delay %s", took, shutdownDelay)
	}
	if l := pod.waitLine("vigil exited ", 10*time.Second); !strings.HasSuffix(l, "vigil exited 0") {
		t.Errorf("%q, want vigil exited 0", l)
	}
	if m.exited() {
		t.Error("the engine stopped: the hook is the engine's, and must not stop it")
	}
	t.Logf("preStop: worker withdrawn after %s, hook returned after %s (vigil exited 0)",
		at.Sub(start).Round(time.Millisecond), returned.Sub(start).Round(time.Millisecond))
}
