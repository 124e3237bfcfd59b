package file

import (
	"io/fs"
	"os"
	"path"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/discoverytest"
)

// flaky is a directory whose record reads fail with ESTALE while failing
// is set, as an NFS client's do while the writer renames a new record into
// place (openzfs #6197); failed counts the reads it failed.
type flaky struct {
	fs.FS
	failing atomic.Bool
	failed  chan string
}

func (f *flaky) ReadFile(name string) ([]byte, error) {
	if f.failing.Load() && path.Ext(name) == ".json" {
		select {
		case f.failed <- name:
		default:
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ESTALE}
	}
	return fs.ReadFile(f.FS, name)
}

// awaitFailed waits for n failed reads.
func (f *flaky) awaitFailed(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.failed:
		case <-time.After(discoverytest.Timeout):
			t.Fatalf("no failed read within %s", discoverytest.Timeout)
		}
	}
}

func flakyDiscoverer(dir string) (*Discoverer, *flaky) {
	f := &flaky{FS: os.DirFS(dir), failed: make(chan string, 1)}
	d := NewDiscoverer(dir, "llm", nil)
	d.fsys = f
	return d, f
}

var w1 = discovery.Registration{Service: "llm", WorkerID: "w1", Address: "127.0.0.1", Port: 8470, Engine: "vllm", Model: "m"}

// A failed read of a live worker's record keeps the worker: no set leaves
// it out. Its removal, unreadable or not, is followed at once.
func TestKeepsRecordOnFailedRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg := New(dir, time.Minute)
	if err := reg.Register(t.Context(), w1); err != nil {
		t.Fatal(err)
	}
	d, f := flakyDiscoverer(dir)
	sets := discoverytest.Watch(t, d)
	if rs := discoverytest.Next(t, sets); len(rs) != 1 {
		t.Fatalf("first set %v, want w1", rs)
	}
	f.failing.Store(true)
	f.awaitFailed(t, 3) // three polls in a row
	select {
	case rs := <-sets:
		t.Fatalf("set %v after failed reads of a live worker's record, want none (w1 kept)", rs)
	default:
	}
	if err := reg.Deregister(t.Context(), w1); err != nil {
		t.Fatal(err)
	}
	if rs := discoverytest.Next(t, sets); len(rs) != 0 {
		t.Errorf("set after the record's removal = %v, want empty", rs)
	}
}

// A record that stays unreadable is kept only until its own expiry.
func TestKeptRecordExpires(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ttl = time.Second
	reg := New(dir, ttl)
	if err := reg.Register(t.Context(), w1); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	d, f := flakyDiscoverer(dir)
	sets := discoverytest.Watch(t, d)
	if rs := discoverytest.Next(t, sets); len(rs) != 1 {
		t.Fatalf("first set %v, want w1", rs)
	}
	f.failing.Store(true)
	rs := discoverytest.Next(t, sets)
	if len(rs) != 0 {
		t.Fatalf("set %v, want empty once the kept record expired", rs)
	}
	if d := time.Since(written); d < ttl {
		t.Errorf("dropped %s after the record was written, want it kept until its expiry (%s)", d, ttl)
	}
}

// A real rename race: the writer renews its record as fast as it can while
// the reader polls; the worker never leaves the sets.
func TestRenameRace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg := New(dir, time.Minute)
	if err := reg.Register(t.Context(), w1); err != nil {
		t.Fatal(err)
	}
	d := NewDiscoverer(dir, "llm", nil)
	d.interval = time.Millisecond
	sets := discoverytest.Watch(t, d)
	if rs := discoverytest.Next(t, sets); len(rs) != 1 {
		t.Fatalf("first set %v, want w1", rs)
	}
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		if err := reg.Heartbeat(t.Context(), w1); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case rs := <-sets:
		t.Fatalf("set %v during renewals, want none", rs)
	default:
	}
}
