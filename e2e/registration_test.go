package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// registrationService is the worker's health service name of its
// registration (workerapi.RegistrationService).
const registrationService = "vigil.registration"

// registrationHealth watches v's registration health service and returns
// a func that waits until it reports want.
func registrationHealth(t *testing.T, v *vigil) func(want healthpb.HealthCheckResponse_ServingStatus, within time.Duration) {
	t.Helper()
	conn, err := grpc.NewClient(v.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); conn.Close() })
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: registrationService})
	if err != nil {
		t.Fatal(err)
	}
	statuses := make(chan healthpb.HealthCheckResponse_ServingStatus, 16)
	go func() {
		defer close(statuses)
		for {
			r, err := watch.Recv()
			if err != nil {
				return
			}
			statuses <- r.GetStatus()
		}
	}()
	return func(want healthpb.HealthCheckResponse_ServingStatus, within time.Duration) {
		t.Helper()
		timeout := time.After(within)
		for {
			select {
			case st, ok := <-statuses:
				if !ok {
					t.Fatalf("the %s watch ended before it reported %s", registrationService, want)
				}
				if st == want {
					return
				}
			case <-timeout:
				t.Fatalf("%s did not report %s within %s", registrationService, want, within)
			}
		}
	}
}

// TestRegistrationRefused: issue 22, item 7. What Consul refuses for a
// reason no retry cures. A model path and a lifetime id over Consul's 512
// bytes are published shortened, with their hash, and logged once; a
// served model name over it exits 78 naming the key; a token without
// permission leaves vigil serving, vigil.registration NOT_SERVING and
// vigil_worker_registration_refused 1 until a token with permission is
// written to CONSUL_HTTP_TOKEN_FILE, which vigil reads again.
func TestRegistrationRefused(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	longPath := "/models/" + strings.Repeat("very-long-directory-name/", 24) + "model" // 613 bytes
	t.Run("long_model_id", func(t *testing.T) {
		t.Parallel()
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{Model: longPath, InstanceID: "inst-" + strings.Repeat("7", 600)})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
			extra: []string{"--served-model-name", "short"}})
		entries, _ := c.passing(t, svc, 30*time.Second, count(1))
		meta := entries[0].Service.Meta
		for _, k := range []string{"model_id", "instance_id"} {
			if len(meta[k]) > 512 || !strings.Contains(meta[k], "#sha256:") {
				t.Errorf("meta %s = %q (%d bytes), want at most 512 bytes with the whole value's hash", k, meta[k], len(meta[k]))
			}
		}
		if !strings.HasPrefix(meta["model_id"], "/models/very-long") || meta["model"] != "short" {
			t.Errorf("meta model %q, model_id %q: want the name as given and the path's prefix", meta["model"], meta["model_id"])
		}
		if n := v.proc.Count("over the registry's limit"); n != 2 {
			t.Errorf("logged %d shortenings, want 2 (model_id and instance_id, once each)", n)
		}
	})
	t.Run("long_model", func(t *testing.T) {
		t.Parallel()
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{Model: longPath})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
		v.exits(78, 30*time.Second, "metadata model is 613 bytes long", "--served-model-name")
		if c.catalogHas(t, svc) {
			t.Error("a worker is registered after vigil refused its metadata")
		}
	})
	t.Run("token_file", func(t *testing.T) {
		t.Parallel()
		tokenFileRotated(t, e)
	})
}

// tokenFileRotated is TestRegistrationRefused/token_file.
func tokenFileRotated(t *testing.T, e *engine) {
	c, _ := startConsulACL(t)
	svc := uniqueService(t)
	readOnly := c.aclToken(t, "read-only", fmt.Sprintf(`service %q { policy = "read" }`, svc))
	writer := c.aclToken(t, "writer", fmt.Sprintf(`service %q { policy = "write" }`, svc))
	tokenFile := filepath.Join(t.TempDir(), "consul-token")
	if err := os.WriteFile(tokenFile, []byte(readOnly+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsAddr := addr(freePort(t))
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		env: []string{"CONSUL_HTTP_TOKEN_FILE=" + tokenFile}, extra: []string{"--metrics-listen", metricsAddr}})
	v.waitLine("lacks permission 'service:write'", 30*time.Second)
	await := registrationHealth(t, v)
	await(healthpb.HealthCheckResponse_NOT_SERVING, 5*time.Second)
	if got := scrape(t, metricsAddr)["vigil_worker_registration_refused"]; got != 1 {
		t.Errorf("vigil_worker_registration_refused = %v while Consul refuses the token, want 1", got)
	}
	if st, err := workerHealth(t, v.Listen, insecure.NewCredentials()); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("readiness = %v, %v while unregistered; want SERVING (the engine serves)", st, err)
	}

	// The token is rotated in the file, as Vault Agent or a Nomad template
	// does: the next renewal is refused, reads the file again and
	// registers.
	if err := os.WriteFile(tokenFile, []byte(writer+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.passing(t, svc, checkTTL+registerBound+5*time.Second, count(1))
	await(healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	if got := scrape(t, metricsAddr)["vigil_worker_registration_refused"]; got != 0 {
		t.Errorf("vigil_worker_registration_refused = %v once registered, want 0", got)
	}
	v.term(t)
	v.exits(0, exitBound)
	if c.catalogHas(t, svc) {
		t.Error("worker left in Consul after SIGTERM: the deregistration did not use the rotated token")
	}
}

// TestOperatorMaintenance: issue 22, item 10. An operator's maintenance of
// the worker's service (consul maint -service) outlives vigil's
// re-registrations within one process: the engine not ready and serving
// again, the agent restarted (a dev agent: it loses every registration),
// the service deregistered by hand. Once the operator ends it, the next
// re-registration has none.
func TestOperatorMaintenance(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	if len(e.notReady) == 0 {
		t.Skip("the first engine has no sleep or pause")
	}
	way := e.notReady[0]
	c := startConsul(t) // its own agent: the restart must not disturb others
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, workerID: "maint-w"})
	c.passing(t, svc, 30*time.Second, count(1))
	id := svc + "-maint-w"
	const reason = "operator: swapping a GPU"
	if err := c.Client.Agent().EnableServiceMaintenance(id, reason); err != nil {
		t.Fatal(err)
	}
	c.registeredAgain(t, id, reason)

	m.post(t, way.enter, nil)
	v.waitLine("worker deregistered", 10*time.Second)
	m.post(t, way.leave, nil)
	c.registeredAgain(t, id, reason)

	c.restart()
	c.registeredAgain(t, id, reason)

	if err := c.Client.Agent().ServiceDeregister(id); err != nil {
		t.Fatal(err)
	}
	c.registeredAgain(t, id, reason)

	if err := c.Client.Agent().DisableServiceMaintenance(id); err != nil {
		t.Fatal(err)
	}
	c.passing(t, svc, 10*time.Second, count(1))
	n := v.proc.Count("worker deregistered")
	m.post(t, way.enter, nil)
	v.waitCount(t, "worker deregistered", n+1, 10*time.Second)
	m.post(t, way.leave, nil)
	c.passing(t, svc, 10*time.Second, count(1))
	if v.exited() {
		t.Fatalf("vigil exited with %d", v.exitCode())
	}
}

// registeredAgain waits until the agent holds service id with vigil's TTL
// check passing, and checks that the operator's maintenance check is there
// too, with its reason. The agent's local state has no blocking query:
// it is polled.
func (a *consulAgent) registeredAgain(t *testing.T, id, reason string) {
	t.Helper()
	deadline := time.Now().Add(checkTTL + registerBound + 5*time.Second)
	for {
		checks, err := a.Client.Agent().ChecksWithFilter(fmt.Sprintf("ServiceID == %q", id))
		if vigilCheck := checks["vigil:"+id]; err == nil && vigilCheck != nil && vigilCheck.Status == api.HealthPassing {
			maint := checks["_service_maintenance:"+id]
			if maint == nil || maint.Notes != reason {
				t.Fatalf("service %s registered again without the operator's maintenance (checks %v)", id, checkIDs(checks))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("service %s not registered again with its check passing within the bound (last: %v, %v)", id, checkIDs(checks), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checkIDs(checks map[string]*api.AgentCheck) []string {
	var ids []string
	for id, c := range checks {
		ids = append(ids, id+"="+c.Status)
	}
	return ids
}

// TestFileRegistryUnreadableRecord: issue 22, item 9. The worker's record
// is listed but cannot be read (a dangling link in its place: ENOENT, as
// an NFS client answers while the writer renames a new record into place,
// or ESTALE): the router keeps the worker as last read, until vigil's next
// renewal rewrites the record; it never leaves.
func TestFileRegistryUnreadableRecord(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir, svc := t.TempDir(), "llm"
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, fileRegistry{dir, svc}.opts(vigilOpts{engine: e, engineAddr: m.GRPC}))
	v.waitLine("worker registered", 30*time.Second)
	r := &router{GRPC: addr(freePort(t)), HTTP: addr(freePort(t))}
	r.proc = startProc(t, "vigil route", vigilBin, "route", "--discovery", "file", "--registry-dir", dir,
		"--service-name", svc, "--listen", r.GRPC, "--http-listen", r.HTTP)
	r.waitLine("worker joined: addr="+v.Listen, 30*time.Second)

	// vigil is stopped for the fault, so that its renewals (every third of
	// the TTL) do not mend the record meanwhile.
	v.signal(syscall.SIGSTOP)
	path := v.RecordPath(dir, svc)
	link := path + ".link"
	if err := os.Symlink(filepath.Join(dir, "gone"), link); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link, path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the fault lasts five of the router's polls
	v.signal(syscall.SIGCONT)
	// vigil's next renewal puts a record back.
	deadline := time.Now().Add(checkTTL)
	for {
		fi, err := os.Lstat(path)
		if err == nil && fi.Mode().IsRegular() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vigil did not rewrite its record within %s (last: %v, %v)", checkTTL, fi, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l := r.findLine("worker left discovery"); l != "" {
		t.Errorf("the router dropped the worker while its record could not be read: %s", l)
	}
	v.signal(syscall.SIGTERM)
	v.exits(0, exitBound)
}
