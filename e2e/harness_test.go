package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	vllmmock "github.com/vigilhq/vigil/plugins/vllm/mock"
)

// mock is a running vllm-mock.
type mock struct {
	*proc
	GRPC, Control string
	InstanceID    string
}

// startMock starts vllm-mock on fresh ports with a fresh instance id.
func startMock(t *testing.T, extra ...string) *mock {
	t.Helper()
	return startMockOn(t, addr(freePort(t)), extra...)
}

// startMockOn starts vllm-mock serving gRPC on grpcAddr.
func startMockOn(t *testing.T, grpcAddr string, extra ...string) *mock {
	t.Helper()
	m := &mock{GRPC: grpcAddr, Control: addr(freePort(t)), InstanceID: fmt.Sprintf("inst-%d", time.Now().UnixNano())}
	args := append([]string{"--listen", m.GRPC, "--control", m.Control, "--model", "test-model", "--instance-id", m.InstanceID}, extra...)
	m.proc = startProc(t, "vllm-mock", mockBin, args...)
	m.waitLine("listening", 30*time.Second)
	return m
}

// post sends a control request and fails the test unless it succeeds.
func (m *mock) post(t *testing.T, path string, body any) {
	t.Helper()
	data, _ := json.Marshal(body)
	resp, err := http.Post("http://"+m.Control+path, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s: %s", path, resp.Status, b)
	}
}

func (m *mock) setHealth(t *testing.T, service, status string) {
	t.Helper()
	m.post(t, "/health", map[string]string{"service": service, "status": status})
}

func (m *mock) state(t *testing.T) vllmmock.State {
	t.Helper()
	resp, err := http.Get("http://" + m.Control + "/state")
	if err != nil {
		t.Fatalf("GET /state: %v", err)
	}
	defer resp.Body.Close()
	var st vllmmock.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /state: %v", err)
	}
	return st
}

// lastHealthChange is when the mock last changed a health status.
func (m *mock) lastHealthChange(t *testing.T) time.Time {
	return time.Unix(0, m.state(t).LastHealthChangeUnixNano)
}

// vigilOpts are the flags of one vigil run.
type vigilOpts struct {
	engineAddr string
	discovery  string // "consul" (default) or "file"
	consul     *consulAgent
	service    string
	registry   string // file registry directory
	extra      []string
}

type vigil struct {
	*proc
	Listen   string
	WorkerID string
}

func startVigil(t *testing.T, o vigilOpts) *vigil {
	t.Helper()
	if o.discovery == "" {
		o.discovery = "consul"
	}
	v := &vigil{Listen: addr(freePort(t))}
	v.WorkerID = "worker-" + filepath.Base(v.Listen)
	args := []string{"run", "--engine", "vllm", "--engine-addr", o.engineAddr, "--listen", v.Listen,
		"--discovery", o.discovery, "--service-name", o.service, "--worker-id", v.WorkerID,
		"--check-ttl", "5s", "--grace-period", "5s", "--log-format", "text"}
	if o.registry != "" {
		args = append(args, "--registry-dir", o.registry)
	}
	args = append(args, o.extra...)
	var env []string
	if o.consul != nil {
		env = o.consul.env()
	}
	v.proc = startProcEnv(t, "vigil", env, vigilBin, args...)
	return v
}

func (v *vigil) term(t *testing.T) { v.signal(syscall.SIGTERM) }

// fileRecord is the file registry's record format, as a reader sees it.
type fileRecord struct {
	ID         string            `json:"id"`
	Service    string            `json:"service"`
	Address    string            `json:"address"`
	Port       int               `json:"port"`
	Engine     string            `json:"engine"`
	Model      string            `json:"model"`
	InstanceID string            `json:"instance_id"`
	Meta       map[string]string `json:"meta"`
	Expires    time.Time         `json:"expires"`
}

// waitFile polls the record path until present is as wanted; a file has no
// event to await without a watcher dependency, so a short poll stands in.
func waitFile(t *testing.T, path string, present bool, timeout time.Duration) (fileRecord, time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		data, err := os.ReadFile(path)
		now := time.Now()
		if present && err == nil {
			var rec fileRecord
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatalf("record %s: %v", path, err)
			}
			return rec, now
		}
		if !present && os.IsNotExist(err) {
			return fileRecord{}, now
		}
		if now.After(deadline) {
			t.Fatalf("record %s present=%v not reached within %s", path, present, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
