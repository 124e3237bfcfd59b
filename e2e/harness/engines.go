package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// StartTimeout bounds each wait for a process to reach a logged milestone
// (listening, registered) when nothing is being measured.
const StartTimeout = 30 * time.Second

// controlClient talks to mocks' control surfaces; its timeout keeps a
// stopped (SIGSTOP) mock from hanging the driver.
var controlClient = &http.Client{Timeout: 10 * time.Second}

// Engine is an engine as the harness runs it: the name vigil knows it by
// and the mock engine that stands in for it. The e2e tests' engine table
// (e2e/engines_test.go) holds one per row, with what the scenarios need to
// know besides.
type Engine struct {
	// Name is the engine's --engine name in vigil run.
	Name string
	// Variant names another way the same engine runs (an older API of it),
	// "" for the engine as it runs today; rows of the e2e table are named
	// Name, or Name-Variant.
	Variant string
	// Mock is the mock engine's binary name; MockPkg the package that
	// builds it.
	Mock, MockPkg string
	// AdapterPkg builds the engine's adapter as an executable of its own,
	// for --engine-plugin; "" when there is none.
	AdapterPkg string
	// MockArgs is the mock's command line for o. Every mock serves the
	// JSON control surface of Mock on o.Control and logs a line holding
	// "listening" once it listens and one holding "serving" once it
	// serves.
	MockArgs func(o MockOpts) []string
	// InstanceID formats a lifetime id the mock takes (--instance-id) from
	// n, a number no other mock of the run is given.
	InstanceID func(n int64) string
}

// NewInstanceID returns a lifetime id for a new mock of e, one no other
// mock of this process is given.
func (e Engine) NewInstanceID() string { return e.InstanceID(uniqueNanos()) }

// lastNanos is the last number uniqueNanos returned.
var lastNanos atomic.Int64

// uniqueNanos returns the time in nanoseconds, or one more than the last
// number it returned when the clock has not moved past it.
func uniqueNanos() int64 {
	for {
		last, now := lastNanos.Load(), time.Now().UnixNano()
		now = max(now, last+1)
		if lastNanos.CompareAndSwap(last, now) {
			return now
		}
	}
}

// kitMockArgs is the command line of a mock on sdk/enginemock's Command
// (the flags every mock shares), with the engine's own flags after them
// and o.Extra last.
func kitMockArgs(engineArgs ...string) func(o MockOpts) []string {
	return func(o MockOpts) []string {
		args := []string{"--listen", o.GRPC, "--control", o.Control, "--model", o.Model}
		if o.InstanceID != "" {
			args = append(args, "--instance-id", o.InstanceID)
		}
		if o.StartupDelay != 0 {
			args = append(args, "--startup-delay", o.StartupDelay.String())
		}
		if o.TokenDelay != nil {
			args = append(args, "--token-delay", o.TokenDelay.String())
		}
		args = append(args, engineArgs...)
		return append(args, o.Extra...)
	}
}

// VLLM is vLLM, stood in for by vllm-mock.
var VLLM = Engine{
	Name:       "vllm",
	Mock:       "vllm-mock",
	MockPkg:    "github.com/vigilhq/vigil/plugins/vllm/cmd/vllm-mock",
	AdapterPkg: "github.com/vigilhq/vigil/plugins/vllm/cmd/vigil-adapter-vllm",
	MockArgs:   kitMockArgs(),
	InstanceID: func(n int64) string { return fmt.Sprintf("inst-%d", n) },
}

// SGLangContextLength is the context length, in tokens, sglang-mock
// reports as SGLang started with a --context-length does (without one it
// reports null: the model's own limit, unknown to vigil).
const SGLangContextLength = 4096

// SGLang is SGLang serving sglang.runtime.v1, stood in for by sglang-mock.
// It has no adapter executable: the adapter is built into vigil alone.
var SGLang = Engine{
	Name:    "sglang",
	Mock:    "sglang-mock",
	MockPkg: "github.com/vigilhq/vigil/plugins/sglang/cmd/sglang-mock",
	MockArgs: kitMockArgs("--api", "runtime",
		"--context-length", strconv.Itoa(SGLangContextLength)),
	// instance_id is a uint64 on SGLang's wire: sglang-mock takes decimal.
	InstanceID: func(n int64) string { return strconv.FormatInt(n, 10) },
}

// SGLangScheduler is an older SGLang server (sglang.grpc.scheduler), which
// serves grpc.health.v1 alone: sglang-mock --api scheduler. vigil finds
// out which API the engine serves by itself.
var SGLangScheduler = Engine{
	Name:       SGLang.Name,
	Variant:    "scheduler",
	Mock:       SGLang.Mock,
	MockPkg:    SGLang.MockPkg,
	MockArgs:   kitMockArgs("--api", "scheduler"),
	InstanceID: SGLang.InstanceID,
}

// Mock is a running mock engine.
type Mock struct {
	*Proc
	GRPC, Control string
	InstanceID    string
}

// MockOpts are the options of one mock engine; Engine.MockArgs turns them
// into the mock's flags.
type MockOpts struct {
	// GRPC is the gRPC listen address, a fresh port when empty; Control
	// the control surface's, always a fresh port chosen by StartMock.
	GRPC, Control string
	// Model is the model the mock serves.
	Model string
	// InstanceID is the engine's lifetime id, for engines that have one;
	// "" lets the mock choose.
	InstanceID string
	// StartupDelay keeps the mock loading (listening, not serving) this
	// long after it starts.
	StartupDelay time.Duration
	// TokenDelay is the pause between two stream messages; nil leaves the
	// mock's default.
	TokenDelay *time.Duration
	// Extra are flags of this mock alone, after the others.
	Extra []string
	// Env is added to the mock's environment, which is the harness's.
	Env []string
}

// mockAttempts is how many times StartMock tries fresh ports when a port
// it picked was taken before the mock could bind it.
const mockAttempts = 3

// StartMock starts e's mock engine (one of the engines the harness was
// built for) serving gRPC on grpcAddr (a fresh port when empty) and waits
// until it listens; extra flags follow the defaults.
func (h *Harness) StartMock(e Engine, grpcAddr string, extra ...string) (*Mock, error) {
	return h.StartMockEnv(e, grpcAddr, nil, extra...)
}

// StartMockEnv is StartMock with env added to the mock's environment.
func (h *Harness) StartMockEnv(e Engine, grpcAddr string, env []string, extra ...string) (*Mock, error) {
	bin, ok := h.Bins.Mocks[e.Mock]
	if !ok {
		return nil, fmt.Errorf("harness: %s was not built (harness.New builds the mocks of the engines it is given)", e.Mock)
	}
	var err error
	for range mockAttempts {
		var m *Mock
		o := MockOpts{GRPC: grpcAddr, Model: "bench-model", InstanceID: e.NewInstanceID(), Extra: extra, Env: env}
		if m, err = StartMock(h, e, bin, o); err == nil {
			return m, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, err
}

// StartMock starts e's mock engine, the executable bin, through s, its
// control surface on a fresh port, and waits until it listens.
func StartMock(s Starter, e Engine, bin string, o MockOpts) (*Mock, error) {
	var err error
	if o.GRPC == "" {
		if o.GRPC, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	if o.Control, err = FreeAddr(); err != nil {
		return nil, err
	}
	m := &Mock{GRPC: o.GRPC, Control: o.Control, InstanceID: o.InstanceID}
	if m.Proc, err = s.Start(e.Mock, o.Env, bin, e.MockArgs(o)...); err != nil {
		return nil, err
	}
	if _, err := m.WaitLine("listening", StartTimeout); err != nil {
		m.Kill()
		return nil, err
	}
	return m, nil
}

// MockState is what the harness reads of a mock's GET /state; every mock
// answers these fields.
type MockState struct {
	// LastHealthChangeUnixNano is time.Now().UnixNano() taken when the
	// engine last changed its health, by the mock's clock (the same wall
	// clock as the driver's).
	LastHealthChangeUnixNano int64 `json:"last_health_change_unix_nano"`
	// Requests counts generation requests received per engine-side
	// request id, rejected ones included; Aborts counts the ids the engine
	// was asked to abort.
	Requests      map[string]int `json:"requests"`
	Aborts        map[string]int `json:"aborts"`
	RequestsTotal int            `json:"requests_total"`
	AbortsTotal   int            `json:"aborts_total"`
	// InFlight is the number of generations running now.
	InFlight int `json:"in_flight"`
	// LastPrompt is the prompt token ids of the last request received.
	LastPrompt []uint32 `json:"last_prompt"`
	// LastMinP is the min_p of the last request received; 0 when unset.
	LastMinP float32 `json:"last_min_p"`
	// LastRequest is the last generation request in the engine's own
	// message, as protojson; nil before any.
	LastRequest json.RawMessage `json:"last_request"`
}

// State reads GET /state.
func (m *Mock) State() (MockState, error) {
	var st MockState
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

// SetHealth pins the health status of the whole server ("" service):
// vllm-mock's grpc.health.v1, sglang-mock's HealthCheck and state stream
// (or, with --api scheduler, its grpc.health.v1).
func (m *Mock) SetHealth(status string) error { return m.SetServiceHealth("", status) }

// SetServiceHealth pins the grpc.health.v1 status of service.
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
	// Engine is the --engine name; "" is VLLM's.
	Engine     string
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
	// DefaultWorkerID leaves --worker-id out, for vigil's own default;
	// Vigil.WorkerID is then empty.
	DefaultWorkerID bool
	Extra           []string
	// Stderr, when set, takes vigil's stderr, its log, in place of the
	// Proc's output (see StartProcStderr); the Starter must then be a
	// StderrStarter.
	Stderr *os.File
	// Env is added to vigil's environment (the adapter's only as
	// --plugin-env passes it on).
	Env []string
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
	if o.WorkerID == "" && !o.DefaultWorkerID {
		_, port, _ := strings.Cut(o.Listen, ":")
		o.WorkerID = "worker-" + port
	}
	if o.Engine == "" {
		o.Engine = VLLM.Name
	}
	v := &Vigil{Listen: o.Listen, WorkerID: o.WorkerID}
	args := []string{"run", "--engine", o.Engine, "--engine-addr", o.EngineAddr, "--listen", v.Listen,
		"--service-name", o.Service, "--log-format", "text"}
	if !o.DefaultWorkerID {
		args = append(args, "--worker-id", v.WorkerID)
	}
	env := o.Env
	if o.Consul != nil {
		args = append(args, "--discovery", "consul")
		env = append(o.Consul.Env(), env...)
	} else {
		args = append(args, "--discovery", "file", "--registry-dir", o.RegistryDir)
	}
	args = append(args, o.Extra...)
	v.Started = time.Now()
	if o.Stderr != nil {
		ss, ok := s.(StderrStarter)
		if !ok {
			return nil, fmt.Errorf("VigilOpts.Stderr: the starter %T cannot start a process with its own stderr", s)
		}
		v.Proc, err = ss.StartStderr("vigil", env, o.Stderr, bin, args...)
	} else {
		v.Proc, err = s.Start("vigil", env, bin, args...)
	}
	if err != nil {
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
	return h.StartRouterArgs(c, service)
}

// StartRouterArgs is StartRouter with extra flags after the harness's.
func (h *Harness) StartRouterArgs(c *Consul, service string, extra ...string) (*Router, error) {
	r := &Router{}
	var err error
	if r.GRPC, err = FreeAddr(); err != nil {
		return nil, err
	}
	if r.HTTP, err = FreeAddr(); err != nil {
		return nil, err
	}
	// JSON logs carry microsecond timestamps, which B7 reads.
	args := append([]string{"route", "--discovery", "consul", "--service-name", service,
		"--listen", r.GRPC, "--http-listen", r.HTTP, "--log-format", "json"}, extra...)
	r.Proc, err = h.Start("vigil route", c.Env(), h.Bins.Vigil, args...)
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
