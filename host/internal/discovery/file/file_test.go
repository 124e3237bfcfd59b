package file_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
)

// reg is a registration with every field a reader gives back set.
func reg(id string) discovery.Registration {
	return discovery.Registration{Service: "llm", WorkerID: id, Address: "127.0.0.1", Port: 8470,
		Engine: "vllm", Model: "m", ModelID: "org/m", InstanceID: "i1", Chat: true, MaxModelLen: 4096,
		Caps: discovery.ParseCapabilities("logprobs=20,n=128,tokenize")}
}

func TestRegisterListDeregister(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := file.New(dir, 5*time.Second)
	ctx := context.Background()
	for _, id := range []string{"b", "a"} {
		if err := r.Register(ctx, reg(id)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := file.List(dir, "llm", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != "a" || recs[1].ID != "b" {
		t.Fatalf("List = %+v, want a and b", recs)
	}
	got := recs[0]
	if got.Model != "m" || got.ModelID != "org/m" || got.InstanceID != "i1" || got.Meta["worker_id"] != "a" || got.Port != 8470 {
		t.Errorf("record = %+v", got)
	}
	if d := got.Expires.Sub(got.Heartbeat); d != 5*time.Second {
		t.Errorf("expires - heartbeat = %s, want the TTL 5s", d)
	}

	// A reader after the TTL sees nothing; a heartbeat brings it back.
	if recs, _ := file.List(dir, "llm", time.Now().Add(6*time.Second)); len(recs) != 0 {
		t.Errorf("List after the TTL = %d records, want 0", len(recs))
	}
	if err := r.Deregister(ctx, reg("a")); err != nil {
		t.Fatal(err)
	}
	if err := r.Deregister(ctx, reg("a")); err != nil {
		t.Errorf("second Deregister = %v, want nil", err)
	}
	if recs, _ := file.List(dir, "llm", time.Now()); len(recs) != 1 || recs[0].ID != "b" {
		t.Errorf("List after deregister = %+v, want b only", recs)
	}
	// Heartbeat rewrites a record deleted from under the worker.
	os.Remove(file.Path(dir, reg("b")))
	if err := r.Heartbeat(ctx, reg("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file.Path(dir, reg("b"))); err != nil {
		t.Errorf("heartbeat did not rewrite the record: %v", err)
	}
}

func TestListSkipsMalformedAndTemporary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "llm"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "llm", "bad.json"), []byte("{"), 0o644)
	os.WriteFile(filepath.Join(dir, "llm", ".x.123.tmp"), []byte("{}"), 0o644)
	recs, err := file.List(dir, "llm", time.Now())
	if err != nil || len(recs) != 0 {
		t.Errorf("List = %v, %v; want no records, no error", recs, err)
	}
	if recs, err := file.List(dir, "absent", time.Now()); err != nil || recs != nil {
		t.Errorf("List of an absent service = %v, %v; want nil, nil", recs, err)
	}
}

// Records are world-readable: a router may run as another user.
func TestRecordReadableByOthers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := file.New(dir, time.Minute).Register(context.Background(), reg("a")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file.Path(dir, reg("a")))
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o644 {
		t.Errorf("record mode = %v, want 0644", mode)
	}
}

func TestCheckWritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := file.CheckWritable(dir, "llm"); err != nil {
		t.Errorf("CheckWritable(temp dir) = %v, want nil", err)
	}
	notDir := filepath.Join(dir, "plain-file")
	os.WriteFile(notDir, nil, 0o644)
	if err := file.CheckWritable(notDir, "llm"); err == nil {
		t.Error("CheckWritable(a regular file) = nil, want an error")
	}
}

// TestMaxWorkerID: a worker id of MaxWorkerID bytes registers, heartbeats
// and deregisters; one byte more is past the file name limit, for which
// vigil run refuses it at startup.
func TestMaxWorkerID(t *testing.T) {
	dir := t.TempDir()
	r := file.New(dir, time.Minute)
	ctx := context.Background()
	w := reg(strings.Repeat("w", file.MaxWorkerID))
	if err := r.Register(ctx, w); err != nil {
		t.Fatalf("Register(%d-byte id) = %v, want nil", file.MaxWorkerID, err)
	}
	for range 20 { // temporary names vary in length
		if err := r.Heartbeat(ctx, w); err != nil {
			t.Fatalf("Heartbeat(%d-byte id) = %v, want nil", file.MaxWorkerID, err)
		}
	}
	if err := r.Deregister(ctx, w); err != nil {
		t.Fatalf("Deregister = %v", err)
	}
	if err := r.Register(ctx, reg(strings.Repeat("w", file.MaxWorkerID+17))); err == nil {
		t.Errorf("Register(%d-byte id) = nil, want a file name too long", file.MaxWorkerID+17)
	}
}
