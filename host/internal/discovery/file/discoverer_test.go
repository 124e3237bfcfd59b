package file_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
