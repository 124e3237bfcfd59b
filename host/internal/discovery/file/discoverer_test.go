package file_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/discoverytest"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
)

func TestDiscoverer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := file.New(dir, time.Minute)
	w := reg("w1")
	other := reg("w2")
	other.Service = "other"
	if err := r.Register(t.Context(), other); err != nil {
		t.Fatal(err)
	}

	sets := discoverytest.Watch(t, file.NewDiscoverer(dir, "llm", nil))
	if rs := discoverytest.Next(t, sets); len(rs) != 0 {
		t.Errorf("first set = %v, want empty (no worker of service llm yet)", rs)
	}

	if err := r.Register(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	// The reader returns what the writer published.
	if diff := cmp.Diff([]discovery.Registration{w}, discoverytest.Next(t, sets)); diff != "" {
		t.Errorf("after Register (-want +got):\n%s", diff)
	}

	// A heartbeat rewrites the record but changes no registration: no
	// set. The deregistration is the next one.
	if err := r.Heartbeat(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if err := r.Deregister(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if rs := discoverytest.Next(t, sets); len(rs) != 0 {
		t.Errorf("after Deregister: %v, want empty", rs)
	}
}

// A record whose meta no current vigil wrote (here without prompts, as a
// vigil before v0.1.0 wrote it) is left out, and the reason logged.
func TestDiscovererLeavesOutOldRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := file.New(dir, time.Minute)
	if err := r.Register(t.Context(), reg("w1")); err != nil {
		t.Fatal(err)
	}
	old := reg("w0")
	if err := r.Register(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	path := file.Path(dir, old)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec file.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	delete(rec.Meta, discovery.MetaPrompts)
	if data, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	var buf syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf})
	sets := discoverytest.Watch(t, file.NewDiscoverer(dir, "llm", log))
	if diff := cmp.Diff([]discovery.Registration{reg("w1")}, discoverytest.Next(t, sets)); diff != "" {
		t.Errorf("first set (-want +got):\n%s", diff)
	}
	want := `[WARN]  leaving out a registration that no current vigil wrote: dir=` + dir +
		` service=llm id=w0 reason="metadata lacks prompts, which every current vigil publishes"`
	if got := buf.String(); !strings.Contains(got, want) {
		t.Errorf("log %q, want %q", got, want)
	}
}

// syncBuffer is a bytes.Buffer safe for the Discoverer's goroutine and the
// test's.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
