package e2e

import (
	"crypto/rand"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

// quietExit bounds vigil's exit after SIGTERM when nothing is registered:
// the adapter's shutdown, not a deregistration's retries under the grace
// period (5s here).
const quietExit = 2 * time.Second

// startConsulACL starts a dev agent of its own with ACLs enabled, denying
// by default; its client carries the management token it returns.
func startConsulACL(t *testing.T) (*consulAgent, string) {
	t.Helper()
	b := make([]byte, 16)
	rand.Read(b)
	management := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	c, err := harness.StartConsulACL(starter{t}, consulBin(t), "e2e-acl", management)
	if err != nil {
		t.Fatal(err)
	}
	return &consulAgent{Consul: c, t: t}, management
}

// aclToken creates a token with a policy of rules; "" rules: a token with
// no policy, which may do nothing.
func (a *consulAgent) aclToken(t *testing.T, name, rules string) string {
	t.Helper()
	tok := &api.ACLToken{Description: name}
	if rules != "" {
		p, _, err := a.Client.ACL().PolicyCreate(&api.ACLPolicy{Name: name, Rules: rules}, nil)
		if err != nil {
			t.Fatalf("creating ACL policy %s: %v", name, err)
		}
		tok.Policies = []*api.ACLTokenPolicyLink{{ID: p.ID}}
	}
	tok, _, err := a.Client.ACL().TokenCreate(tok, nil)
	if err != nil {
		t.Fatalf("creating ACL token %s: %v", name, err)
	}
	return tok.SecretID
}

// termFast sends SIGTERM and checks that vigil exits 0 within quietExit,
// deregistering nothing (it registered nothing); it returns the time taken.
func termFast(t *testing.T, v *vigil) time.Duration {
	t.Helper()
	began := time.Now()
	v.term(t)
	out := v.exits(0, 10*time.Second)
	took := time.Since(began)
	if took > quietExit {
		t.Errorf("exit took %v after SIGTERM, want at most %v: nothing was registered", took, quietExit)
	}
	for _, s := range []string{"deregist", "withdraw"} {
		if line := v.findLine(s); line != "" {
			t.Errorf("log says %q, want no deregistration of a worker never registered:\n%s", line, out)
		}
	}
	return took
}

// TestStartupWaitLogged: vigil pointed at an address where no engine
// listens says so at once, with the last error, instead of nothing until
// the startup deadline; SIGTERM during the wait exits 0 at once,
// deregistering nothing.
func TestStartupWaitLogged(t *testing.T) {
	e := firstEngine()
	dir := t.TempDir()
	v := startVigil(t, vigilOpts{engine: e, engineAddr: addr(freePort(t)), discovery: "file", registry: dir, service: "diag"})
	line := v.waitLine("waiting for the engine to serve", 20*time.Second)
	waited := time.Since(v.Started)
	if !strings.Contains(line, "last_error=") || !strings.Contains(line, "engine_addr=") {
		t.Errorf("wait entry %q, want the engine address and the last error", line)
	}
	t.Logf("startup wait logged %v after vigil started: %s", waited.Round(time.Millisecond), line)
	t.Logf("exit %v after SIGTERM", termFast(t, v).Round(time.Millisecond))
}

// TestConsulPermissionDenied: a Consul that refuses the worker's
// registration for want of a permission (no token, a token that may only
// read, an unknown token) is logged at ERROR in Consul's words, which name
// the missing permission; SIGTERM then exits at once, deregistering
// nothing, for nothing was registered.
func TestConsulPermissionDenied(t *testing.T) {
	c, _ := startConsulACL(t)
	const svc = "diag-acl"
	readOnly := c.aclToken(t, "read-only", fmt.Sprintf(`service %q { policy = "read" }`, svc))
	tokens := []struct{ name, token, says string }{
		{"no token", "", "lacks permission"},
		{"read-only token", readOnly, "lacks permission 'service:write'"},
		{"unknown token", "8f2f2a4e-0000-4000-8000-000000000001", "ACL not found"},
	}
	e := firstEngine()
	for _, tc := range tokens {
		t.Run(tc.name, func(t *testing.T) {
			m := startMock(t, e, harness.MockOpts{})
			v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
				env: []string{"CONSUL_HTTP_TOKEN=" + tc.token}})
			line := v.waitLine(tc.says, 30*time.Second)
			if !strings.Contains(line, "[ERROR]") {
				t.Errorf("refusal logged as %q, want ERROR", line)
			}
			t.Logf("logged: %s", line)
			t.Logf("exit %v after SIGTERM", termFast(t, v).Round(time.Millisecond))
		})
	}
}

// TestRouteACLFiltered: a router whose token Consul shows no worker (ACL
// filtering, not a refusal) says so once, at WARN.
func TestRouteACLFiltered(t *testing.T) {
	c, management := startConsulACL(t)
	const svc = "diag-filtered"
	e := firstEngine()
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		env: []string{"CONSUL_HTTP_TOKEN=" + management}})
	v.waitLine("worker registered", 30*time.Second)

	blind := c.aclToken(t, "blind", "")
	r := &router{GRPC: addr(freePort(t)), HTTP: addr(freePort(t))}
	r.proc = startProcEnv(t, "vigil route", append(c.env(), "CONSUL_HTTP_TOKEN="+blind), vigilBin, "route", "--discovery", "consul",
		"--service-name", svc, "--listen", r.GRPC, "--http-listen", r.HTTP)
	line := r.waitLine("ACLs hid", 30*time.Second)
	if !strings.Contains(line, "[WARN]") || !strings.Contains(line, "service:read") {
		t.Errorf("filtering logged as %q, want a WARN naming service:read", line)
	}
	// A second answer (the worker's renewals do not change the set, so a
	// deregistration does) must not say it again.
	v.term(t)
	v.exits(0, 30*time.Second)
	r.signal(syscall.SIGTERM)
	r.exits(0, 30*time.Second)
	if n := r.Count("ACLs hid"); n != 1 {
		t.Errorf("said %d times that ACLs hid workers, want once", n)
	}
}
