package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	vllmmock "github.com/vigilhq/vigil/plugins/vllm/mock"
)

// StartTimeout bounds each wait for a process to reach a logged milestone
// (listening, registered) when nothing is being measured.
const StartTimeout = 30 * time.Second

// controlClient talks to mocks' control surfaces; its timeout keeps a
// stopped (SIGSTOP) mock from hanging the driver.
var controlClient = &http.Client{Timeout: 10 * time.Second}

// Mock is a running vllm-mock.
type Mock struct {
	*Proc
	GRPC, Control string
	InstanceID    string
}

// MockOpts are the flags of one vllm-mock.
type MockOpts struct {
	// GRPC is the gRPC listen address, a fresh port when empty.
	GRPC, Model, InstanceID string
	Extra                   []string
}

// mockAttempts is how many times StartMock tries fresh ports when a port
// it picked was taken before the mock could bind it.
const mockAttempts = 3

// StartMock starts vllm-mock serving gRPC on grpcAddr (a fresh port when
// empty) and waits until it listens; extra flags follow the defaults.
func (h *Harness) StartMock(grpcAddr string, extra ...string) (*Mock, error) {
	var err error
	for range mockAttempts {
		var m *Mock
		o := MockOpts{GRPC: grpcAddr, Model: "bench-model", InstanceID: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Extra: extra}
		if m, err = StartMock(h, h.Bins.Mock, o); err == nil {
			return m, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, err
}

// StartMock starts the vllm-mock bin through s, its control surface on a
// fresh port, and waits until it listens.
func StartMock(s Starter, bin string, o MockOpts) (*Mock, error) {
	var err error
	if o.GRPC == "" {
		if o.GRPC, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	m := &Mock{GRPC: o.GRPC, InstanceID: o.InstanceID}
	if m.Control, err = FreeAddr(); err != nil {
		return nil, err
	}
	args := append([]string{"--listen", m.GRPC, "--control", m.Control, "--model", o.Model,
		"--instance-id", o.InstanceID}, o.Extra...)
	if m.Proc, err = s.Start("vllm-mock", nil, bin, args...); err != nil {
		return nil, err
	}
	if _, err := m.WaitLine("listening", StartTimeout); err != nil {
		m.Kill()
		return nil, err
	}
	return m, nil
}

// State reads GET /state.
func (m *Mock) State() (vllmmock.State, error) {
	var st vllmmock.State
	resp, err := controlClient.Get("http://" + m.Control + "/state")
	if err != nil {
		return st, fmt.Errorf("GET /state: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("GET /state: %w", err)
	}
	return st, nil
}

// SetHealth pins the health status of the whole server ("" service).
func (m *Mock) SetHealth(status string) error { return m.SetServiceHealth("", status) }

// SetServiceHealth pins the health status of service.
func (m *Mock) SetServiceHealth(service, status string) error {
	return m.Post("/health", map[string]string{"service": service, "status": status})
}

// Post sends body as JSON to the control surface's path and fails unless
// the answer is 200 OK.
func (m *Mock) Post(path string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := controlClient.Post("http://"+m.Control+path, "application/json", bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, b)
	}
	return nil
}

// LastHealthChange is when the mock last changed a health status, by its
// own clock (the same wall clock as the driver's).
func (m *Mock) LastHealthChange() (time.Time, error) {
	st, err := m.State()
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, st.LastHealthChangeUnixNano), nil
}

// VigilOpts are the flags of one `vigil run`.
type VigilOpts struct {
	EngineAddr string
	// Consul, when set, selects --discovery consul against it; otherwise
	// the file registry under RegistryDir.
	Consul      *Consul
	RegistryDir string
	Service     string
	// Listen is vigil's listen address, a fresh port when empty.
	Listen string
	// WorkerID defaults to worker-PORT, the port of Listen.
	WorkerID string
	Extra    []string
}

// Vigil is a running `vigil run`.
type Vigil struct {
	*Proc
	Listen, WorkerID string
	// Started is the time just before the process was started.
	Started time.Time
}

// StartVigil starts `vigil run` and returns at once.
func (h *Harness) StartVigil(o VigilOpts) (*Vigil, error) {
	return StartVigil(h, h.Bins.Vigil, o)
}

// StartVigil starts `vigil run` from bin through s and returns at once.
func StartVigil(s Starter, bin string, o VigilOpts) (*Vigil, error) {
	var err error
	if o.Listen == "" {
		if o.Listen, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	if o.WorkerID == "" {
		_, port, _ := strings.Cut(o.Listen, ":")
		o.WorkerID = "worker-" + port
	}
	v := &Vigil{Listen: o.Listen, WorkerID: o.WorkerID}
	args := []string{"run", "--engine", "vllm", "--engine-addr", o.EngineAddr, "--listen", v.Listen,
		"--service-name", o.Service, "--worker-id", v.WorkerID, "--log-format", "text"}
	var env []string
	if o.Consul != nil {
		args = append(args, "--discovery", "consul")
		env = o.Consul.Env()
	} else {
		args = append(args, "--discovery", "file", "--registry-dir", o.RegistryDir)
	}
	args = append(args, o.Extra...)
	v.Started = time.Now()
	if v.Proc, err = s.Start("vigil", env, bin, args...); err != nil {
		return nil, err
	}
	return v, nil
}

// RecordPath is the worker's file registry record.
func (v *Vigil) RecordPath(dir, service string) string {
	return filepath.Join(dir, service, v.WorkerID+".json")
}

// Router is a running `vigil route`.
type Router struct {
	*Proc
	GRPC, HTTP string
}

// StartRouter starts `vigil route` over Consul for service and returns at
// once.
func (h *Harness) StartRouter(c *Consul, service string) (*Router, error) {
	r := &Router{}
	var err error
	if r.GRPC, err = FreeAddr(); err != nil {
		return nil, err
	}
	if r.HTTP, err = FreeAddr(); err != nil {
		return nil, err
	}
	// JSON logs carry microsecond timestamps, which B7 reads.
	r.Proc, err = h.Start("vigil route", c.Env(), h.Bins.Vigil, "route", "--discovery", "consul",
		"--service-name", service, "--listen", r.GRPC, "--http-listen", r.HTTP, "--log-format", "json")
	return r, err
}

// LoggedAt waits up to timeout for a log line containing substr and
// returns its timestamp.
func (r *Router) LoggedAt(substr string, timeout time.Duration) (time.Time, error) {
	line, err := r.WaitLine(substr, timeout)
	if err != nil {
		return time.Time{}, err
	}
	var rec struct {
		Timestamp time.Time `json:"@timestamp"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		return time.Time{}, fmt.Errorf("router log line %q: %w", line, err)
	}
	return rec.Timestamp, nil
}

// WaitWorkers polls GET /health until the router knows a worker.
func (r *Router) WaitWorkers(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := controlClient.Get("http://" + r.HTTP + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if r.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("router knew no worker within %s (last: %v); last lines:\n%s", timeout, err, r.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
