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
		if m, err = h.startMock(grpcAddr, extra); err == nil {
			return m, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, err
}

func (h *Harness) startMock(grpcAddr string, extra []string) (*Mock, error) {
	var err error
	if grpcAddr == "" {
		if grpcAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	m := &Mock{GRPC: grpcAddr}
	if m.Control, err = FreeAddr(); err != nil {
		return nil, err
	}
	args := append([]string{"--listen", m.GRPC, "--control", m.Control, "--model", "bench-model",
		"--instance-id", fmt.Sprintf("bench-%d", time.Now().UnixNano())}, extra...)
	if m.Proc, err = h.Start("vllm-mock", nil, h.Bins.Mock, args...); err != nil {
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
func (m *Mock) SetHealth(status string) error {
	return m.post("/health", map[string]string{"service": "", "status": status})
}

func (m *Mock) post(path string, body any) error {
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
	Extra       []string
}

// Vigil is a running `vigil run`.
type Vigil struct {
	*Proc
	Listen, WorkerID string
	// Started is the time just before the process was started.
	Started time.Time
}

// StartVigil starts `vigil run` on a fresh port and returns at once.
func (h *Harness) StartVigil(o VigilOpts) (*Vigil, error) {
	listen, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(listen, ":")
	v := &Vigil{Listen: listen, WorkerID: "worker-" + port}
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
	if v.Proc, err = h.Start("vigil", env, h.Bins.Vigil, args...); err != nil {
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
