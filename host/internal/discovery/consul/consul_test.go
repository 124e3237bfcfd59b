package consul

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// fakeAgent answers the agent endpoints a Registry uses from one service it
// holds, as a Consul agent would, and records the writes.
type fakeAgent struct {
	mu      sync.Mutex
	service *api.AgentService // nil: none
	check   api.HealthCheck
	writes  []string // method and path of each write
	// token, when set, is the only token the agent takes; others get 403.
	token string
}

func (f *fakeAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodGet {
		f.writes = append(f.writes, r.Method+" "+r.URL.Path)
	}
	if f.token != "" && r.Header.Get("X-Consul-Token") != f.token {
		http.Error(w, "Permission denied: token with AccessorID '' lacks permission 'service:write' on \"llm\"", http.StatusForbidden)
		return
	}
	switch {
	case r.URL.Path == "/v1/agent/service/register":
		var reg api.AgentServiceRegistration
		json.NewDecoder(r.Body).Decode(&reg)
		f.service = &api.AgentService{ID: reg.ID, Service: reg.Name, Address: reg.Address, Port: reg.Port, Meta: reg.Meta}
		f.check = api.HealthCheck{CheckID: reg.Check.CheckID, Status: reg.Check.Status}
	case strings.HasPrefix(r.URL.Path, "/v1/agent/health/service/id/"):
		if f.service == nil || f.service.ID != strings.TrimPrefix(r.URL.Path, "/v1/agent/health/service/id/") {
			http.Error(w, "ServiceId not found", http.StatusNotFound)
			return
		}
		check := f.check
		json.NewEncoder(w).Encode(api.AgentServiceChecksInfo{AggregatedStatus: check.Status, Service: f.service, Checks: api.HealthChecks{&check}})
	case strings.HasPrefix(r.URL.Path, "/v1/agent/check/update/"):
		var body struct{ Status, Output string }
		json.NewDecoder(r.Body).Decode(&body)
		if f.service == nil {
			http.Error(w, "unknown check", http.StatusNotFound)
			return
		}
		f.check.Status, f.check.Output = body.Status, body.Output
	case strings.HasPrefix(r.URL.Path, "/v1/agent/service/deregister/"):
		f.service = nil
	default:
		http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
	}
}

// holding returns a Registry over a fake agent that holds r as owner's
// registration, passing.
func holding(t *testing.T, r discovery.Registration, owner string) (*Registry, *fakeAgent) {
	t.Helper()
	r.Owner = owner
	f := &fakeAgent{
		service: &api.AgentService{ID: ServiceID(r), Service: r.Service, Address: r.Address, Port: r.Port, Meta: r.Meta()},
		check:   api.HealthCheck{CheckID: CheckID(r), Status: api.HealthPassing, Output: "renewal 7"},
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client, err := api.NewClient(&api.Config{Address: strings.TrimPrefix(srv.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	return New(client, srv.URL, Options{TTL: 5 * time.Second, DeregisterAfter: time.Minute}), f
}

var me = discovery.Registration{Service: "llm", WorkerID: "w1", Address: "127.0.0.2", Port: 8470, Owner: "B"}

// Another owner's registration of the worker: Claim tells whose it is and
// where, Heartbeat reports it not ours, Deregister leaves it.
func TestAnothersRegistration(t *testing.T) {
	t.Parallel()
	theirs := me
	theirs.Address = "127.0.0.1"
	reg, agent := holding(t, theirs, "A")
	ctx := context.Background()

	c, ok, err := reg.Claim(ctx, me)
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v; want A's registration", ok, err)
	}
	if diff := cmp.Diff(discovery.Claim{Owner: "A", Address: "127.0.0.1", Port: 8470, Renewal: "renewal 7"}, c); diff != "" {
		t.Errorf("Claim (-want +got):\n%s", diff)
	}
	if err := reg.Heartbeat(ctx, me); !errors.Is(err, discovery.ErrNotRegistered) || !strings.Contains(err.Error(), "127.0.0.1:8470") {
		t.Errorf("Heartbeat = %v, want ErrNotRegistered naming 127.0.0.1:8470", err)
	}
	if err := reg.Deregister(ctx, me); !errors.Is(err, discovery.ErrNotRegistered) {
		t.Errorf("Deregister = %v, want ErrNotRegistered", err)
	}
	agent.mu.Lock()
	defer agent.mu.Unlock()
	if agent.service == nil || agent.service.Meta[discovery.MetaOwner] != "A" {
		t.Errorf("agent holds %+v, want A's service", agent.service)
	}
	for _, w := range agent.writes {
		if strings.Contains(w, "deregister") {
			t.Errorf("wrote %s, want no deregistration of another's service", w)
		}
	}
}

// Its own registration: each renewal changes the check's output, which is
// what another vigil watching it sees; a critical check is stale.
func TestOwnRegistration(t *testing.T) {
	t.Parallel()
	reg, agent := holding(t, me, "B")
	ctx := context.Background()
	var renewals []string
	for range 2 {
		if err := reg.Heartbeat(ctx, me); err != nil {
			t.Fatal(err)
		}
		c, _, err := reg.Claim(ctx, me)
		if err != nil {
			t.Fatal(err)
		}
		renewals = append(renewals, c.Renewal)
	}
	if renewals[0] == renewals[1] || !strings.Contains(renewals[1], "B") {
		t.Errorf("check outputs after two renewals: %q, want them to differ and name the owner", renewals)
	}
	agent.mu.Lock()
	agent.check.Status = api.HealthCritical
	agent.mu.Unlock()
	if c, _, _ := reg.Claim(ctx, me); !c.Stale {
		t.Errorf("Claim with the check critical = %+v, want stale", c)
	}
	if err := reg.Deregister(ctx, me); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := reg.Claim(ctx, me); ok || err != nil {
		t.Errorf("Claim after Deregister = %v, %v; want none", ok, err)
	}
	if err := reg.Heartbeat(ctx, me); !errors.Is(err, discovery.ErrNotRegistered) {
		t.Errorf("Heartbeat after Deregister = %v, want ErrNotRegistered", err)
	}
}

// A token rotated in CONSUL_HTTP_TOKEN_FILE is taken up after the agent
// refuses the old one, in the same call, without a restart.
func TestTokenFileReread(t *testing.T) {
	t.Parallel()
	f := &fakeAgent{token: "new-token"}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := api.NewClient(&api.Config{Address: strings.TrimPrefix(srv.URL, "http://"), TokenFile: path})
	if err != nil {
		t.Fatal(err)
	}
	reg := New(client, srv.URL, Options{TTL: 5 * time.Second, DeregisterAfter: time.Minute, TokenFile: path})
	ctx := context.Background()
	if err := reg.Register(ctx, me); !errors.Is(err, discovery.ErrPermissionDenied) {
		t.Fatalf("Register with the old token = %v, want ErrPermissionDenied", err)
	}
	if err := os.WriteFile(path, []byte("new-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(ctx, me); err != nil {
		t.Fatalf("Register after the token file was rotated = %v, want nil", err)
	}
	if err := reg.Heartbeat(ctx, me); err != nil {
		t.Fatalf("Heartbeat with the new token = %v", err)
	}
}
