package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

// podmanConf is podman's configuration for these machines (see the file);
// CONTAINERS_CONF in the environment overrides it.
const podmanConf = "testdata/podman/containers.conf"

// imageName is the repository `make image` tags for the tests, apart from
// an operator's localhost/vigil.
const imageName = "localhost/vigil-e2e"

// imageMaxBytes bounds the image's size: the static, stripped vigil (about
// 17 MB) and a CA bundle. A base image or an unstripped binary passes it.
const imageMaxBytes = 30 << 20

// podmanFor returns podman as the tests run it. Without podman on PATH the
// test skips, unless VIGIL_REQUIRE_PODMAN=1 (CI), where it fails.
func podmanFor(t *testing.T) harness.Podman {
	t.Helper()
	bin, err := exec.LookPath("podman")
	if err != nil {
		if os.Getenv("VIGIL_REQUIRE_PODMAN") == "1" {
			t.Fatalf("VIGIL_REQUIRE_PODMAN=1 and no podman on PATH: %v", err)
		}
		t.Skip("no podman on PATH (apt-get install podman runc; VIGIL_REQUIRE_PODMAN=1 makes this a failure)")
	}
	conf := os.Getenv("CONTAINERS_CONF")
	if conf == "" {
		if conf, err = filepath.Abs(podmanConf); err != nil {
			t.Fatal(err)
		}
	}
	return harness.Podman{Bin: bin, Env: []string{"CONTAINERS_CONF=" + conf}}
}

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  error
)

// builtImage runs `make image` once per test binary, tagging
// imageName:e2e, and returns that reference.
func builtImage(t *testing.T, pm harness.Podman) string {
	t.Helper()
	imageOnce.Do(func() {
		root, err := harness.RepoRoot()
		if err != nil {
			imageErr = err
			return
		}
		started := time.Now()
		cmd := exec.Command("make", "--no-print-directory", "image", "IMAGE="+imageName, "IMAGE_TAG=e2e", "PODMAN="+pm.Bin)
		cmd.Dir, cmd.Env = root, append(os.Environ(), pm.Env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			imageErr = fmt.Errorf("make image: %w\n%s", err, out)
			return
		}
		imageRef = imageName + ":e2e"
		t.Logf("make image took %s", time.Since(started).Round(100*time.Millisecond))
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageRef
}

var containerSeq atomic.Int64

// startImageVigil starts `vigil run` as a container of image against the
// engine at engineAddr, registering service in c; the container is removed
// when the test ends.
func startImageVigil(t *testing.T, pm harness.Podman, image string, e *engine, engineAddr string, c *consulAgent, service string) (*vigil, harness.Container) {
	t.Helper()
	ct := harness.Container{Podman: pm, Starter: starter{t}, Image: image,
		Name: fmt.Sprintf("vigil-e2e-%d-%d", os.Getpid(), containerSeq.Add(1))}
	hv, err := harness.StartVigil(ct, "", harness.VigilOpts{Engine: e.Name, EngineAddr: engineAddr, Consul: c.Consul,
		Service: service, Listen: addr(freePort(t)),
		Extra: []string{"--check-ttl", "5m", "--grace-period", "5s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ct.Remove(); err != nil {
			t.Errorf("removing container %s: %v", ct.Name, err)
		}
	})
	return &vigil{proc: &proc{Proc: hv.Proc, t: t}, Vigil: hv}, ct
}

// TestImage: the image `make image` builds, run by podman on the host's
// network (no pull: it is FROM scratch), serves as each built-in engine by
// --engine alone. For each row, a container of the same image runs as the
// unprivileged user 65532, starts its built-in adapter (which needs the
// image's writable /tmp), and registers the worker in Consul with the
// engine's meta; when its engine is killed, the worker is withdrawn and
// the container exits 1; SIGTERM by `podman kill` withdraws it and exits
// 0. The image's size is logged and bounded, and its version label is the
// version its vigil reports.
func TestImage(t *testing.T) {
	skipShort(t)
	t.Parallel()
	pm := podmanFor(t)
	image := builtImage(t, pm)

	cfg, err := pm.Command("image", "inspect", "--format",
		`{{.Size}}|{{.Config.User}}|{{json .Config.Entrypoint}}|{{index .Config.Labels "org.opencontainers.image.version"}}`, image)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(cfg, "|")
	if len(fields) != 4 {
		t.Fatalf("podman image inspect: %q, want 4 fields", cfg)
	}
	size, _ := strconv.ParseInt(fields[0], 10, 64)
	t.Logf("image %s: %.1f MB", image, float64(size)/1e6)
	if size <= 0 || size > imageMaxBytes {
		t.Errorf("image size %d bytes, want at most %d", size, imageMaxBytes)
	}
	if fields[1] != "65532:65532" || fields[2] != `["/vigil"]` {
		t.Errorf("image user %q, entrypoint %s; want 65532:65532, [\"/vigil\"]", fields[1], fields[2])
	}
	version, err := pm.Command("run", "--rm", "--pull", "never", image, "--version")
	if err != nil {
		t.Fatal(err)
	}
	if want := "vigil version " + fields[3]; fields[3] == "" || version != want {
		t.Errorf("vigil --version in the image = %q, want %q (the org.opencontainers.image.version label)", version, want)
	}

	forEachEngine(t, func(t *testing.T, e *engine) {
		c := consulFor(t)
		t.Run("engine lost", func(t *testing.T) {
			svc := uniqueService(t)
			m := startMock(t, e, harness.MockOpts{})
			v, ct := startImageVigil(t, pm, image, e, m.GRPC, c, svc)
			s := passingWhileUp(t, c, svc, v)
			if s.Meta["engine"] != e.Name || s.Meta["model"] != e.servedModel || s.Meta["instance_id"] != e.instanceID(m) || addr(s.Port) != v.Listen {
				t.Errorf("registered engine %q model %q instance_id %q port %d; want %q, %q, %q, %s", s.Meta["engine"], s.Meta["model"],
					s.Meta["instance_id"], s.Port, e.Name, e.servedModel, e.instanceID(m), v.Listen)
			}
			checkUnprivileged(t, pm, ct)

			lost := time.Now()
			m.signal(syscall.SIGKILL)
			if code := v.wait(exitBound); code != 1 {
				t.Fatalf("container exit code = %d after the engine was killed, want 1", code)
			}
			t.Logf("container exited %s after the engine was killed", time.Since(lost).Round(time.Millisecond))
			v.waitLine(e.lostReason, 0)
			if c.catalogHas(t, svc) {
				t.Error("worker still in Consul after the container exited: it did not deregister")
			}
		})
		t.Run("SIGTERM", func(t *testing.T) {
			svc := uniqueService(t)
			m := startMock(t, e, harness.MockOpts{})
			v, ct := startImageVigil(t, pm, image, e, m.GRPC, c, svc)
			passingWhileUp(t, c, svc, v)

			sent := time.Now()
			if err := ct.Kill("TERM"); err != nil {
				t.Fatal(err)
			}
			if code := v.wait(exitBound); code != 0 {
				t.Fatalf("container exit code = %d after SIGTERM, want 0", code)
			}
			t.Logf("container exited %s after podman kill --signal TERM began", time.Since(sent).Round(time.Millisecond))
			if c.catalogHas(t, svc) {
				t.Error("worker still in Consul after the container exited on SIGTERM")
			}
			if m.exited() {
				t.Errorf("the engine exited (%d): SIGTERM to the container must leave it be", m.exitCode())
			}
		})
	})
}

// passingWhileUp waits until one instance of service passes and returns
// it, failing at once when the container v exits first (an image that
// cannot start its adapter exits 78 at startup).
func passingWhileUp(t *testing.T, c *consulAgent, service string, v *vigil) *api.AgentService {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		select {
		case <-v.proc.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	entries, _, err := c.Passing(ctx, service, count(1))
	switch {
	case err == nil:
		return entries[0].Service
	case v.exited():
		t.Fatalf("the container exited with %d before its worker passed in Consul", v.exitCode())
	default:
		t.Fatal(err)
	}
	return nil
}

// checkUnprivileged fails the test unless the container's main process and
// its children (the adapter) run as uid and gid 65532, read from /proc on
// the host: podman shares the host's pid numbering with its containers'
// processes as seen from outside.
func checkUnprivileged(t *testing.T, pm harness.Podman, ct harness.Container) {
	t.Helper()
	out, err := pm.Command("inspect", "--format", "{{.State.Pid}}", ct.Name)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(out)
	if err != nil || pid <= 0 {
		t.Fatalf("podman inspect: pid %q", out)
	}
	pids := append([]int{pid}, children(pid)...)
	if len(pids) < 2 {
		t.Errorf("vigil (pid %d) has no child process: no adapter running", pid)
	}
	for _, p := range pids {
		uid, gid := procIDs(t, p)
		if uid != "65532" || gid != "65532" {
			t.Errorf("process %d in the container runs as uid %s gid %s, want 65532 and 65532", p, uid, gid)
		}
	}
}

// procIDs is the real uid and gid of process pid, from /proc/pid/status.
func procIDs(t *testing.T, pid int) (uid, gid string) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		if f := strings.Fields(v); len(f) > 0 {
			switch k {
			case "Uid":
				uid = f[0]
			case "Gid":
				gid = f[0]
			}
		}
	}
	return uid, gid
}

// TestNoTempDir: the adapter makes its go-plugin socket in the temporary
// directory, so vigil whose TMPDIR cannot take a file (an image without a
// writable /tmp) exits 78 at startup naming TMPDIR, starting nothing,
// rather than taking its own built-in adapter for "not a vigil engine
// adapter" once it has exited before the handshake.
func TestNoTempDir(t *testing.T) {
	skipShort(t)
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	p := startProcEnv(t, "vigil", []string{"TMPDIR=" + missing}, vigilBin, "run", "--engine", firstEngine().Name,
		"--engine-addr", addr(freePort(t)), "--listen", addr(freePort(t)), "--registry-dir", t.TempDir())
	out := p.exits(78, 10*time.Second, `TMPDIR "`+missing+`"`, "writable")
	for _, not := range []string{"starting engine adapter", "not a vigil engine adapter"} {
		if strings.Contains(out, not) {
			t.Errorf("output holds %q:\n%s", not, out)
		}
	}
}

// TestLongTempDir: a TMPDIR too long for the adapter's Unix socket path
// (sun_path is 108 bytes on Linux) exits 78 at startup naming TMPDIR, its
// length and the limit, starting nothing, not "not a vigil engine
// adapter" once the adapter has failed to listen (terraform #22198).
func TestLongTempDir(t *testing.T) {
	skipShort(t)
	t.Parallel()
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))[:120]
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	p := startProcEnv(t, "vigil", []string{"TMPDIR=" + long}, vigilBin, "run", "--engine", firstEngine().Name,
		"--engine-addr", addr(freePort(t)), "--listen", addr(freePort(t)), "--registry-dir", t.TempDir())
	out := p.exits(78, 10*time.Second, "TMPDIR is 120 bytes long", "platform's limit of")
	for _, not := range []string{"starting engine adapter", "not a vigil engine adapter"} {
		if strings.Contains(out, not) {
			t.Errorf("output holds %q:\n%s", not, out)
		}
	}
}
