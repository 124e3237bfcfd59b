// Package file is the embedded discovery backend, both halves: a
// [Registry] that keeps one JSON record per worker at
// <dir>/<service>/<worker-id>.json, rewritten atomically on every heartbeat
// and removed on withdrawal, and a [Discoverer] that polls the directory.
// Readers skip records whose expiry time has passed, so a worker whose
// vigil was killed drops out after one TTL.
package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
)

// Record is the file format of one worker.
type Record struct {
	ID         string            `json:"id"`
	Service    string            `json:"service"`
	Address    string            `json:"address"`
	Port       int               `json:"port"`
	Engine     string            `json:"engine"`
	Model      string            `json:"model"`
	ModelID    string            `json:"model_id"`
	InstanceID string            `json:"instance_id"`
	Meta       map[string]string `json:"meta"`
	// Heartbeat is when the record was last written.
	Heartbeat time.Time `json:"heartbeat"`
	// Expires is Heartbeat plus the TTL: past it, the record is stale.
	Expires time.Time `json:"expires"`
}

// Registry is a discovery.Registry over a directory.
type Registry struct {
	dir string
	ttl time.Duration
}

var _ discovery.Registry = (*Registry)(nil)

// New returns a Registry that keeps records under dir with the given TTL.
func New(dir string, ttl time.Duration) *Registry { return &Registry{dir: dir, ttl: ttl} }

func (f *Registry) String() string { return "file " + f.dir }

// TTL is how long a record stays fresh after it was written.
func (f *Registry) TTL() time.Duration { return f.ttl }

// CheckWritable reports whether records of service can be written under
// dir, creating the directories it needs; vigil calls it at startup so that
// a bad --registry-dir is an error then, not a stream of failed heartbeats.
func CheckWritable(dir, service string) error {
	sdir := filepath.Join(dir, service)
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(sdir, ".vigil-check.*.tmp")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// Path is where the record of r lives.
func Path(dir string, r discovery.Registration) string {
	return filepath.Join(dir, r.Service, r.WorkerID+".json")
}

// Register writes the record.
func (f *Registry) Register(_ context.Context, r discovery.Registration) error {
	return f.write(r)
}

// Heartbeat rewrites the record with a new expiry. A record deleted from
// under the worker is written again.
func (f *Registry) Heartbeat(_ context.Context, r discovery.Registration) error {
	return f.write(r)
}

// Deregister removes the record.
func (f *Registry) Deregister(_ context.Context, r discovery.Registration) error {
	if err := os.Remove(Path(f.dir, r)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing worker record: %w", err)
	}
	return nil
}

// newRecord is r's record written at now, fresh for ttl.
func newRecord(r discovery.Registration, now time.Time, ttl time.Duration) Record {
	return Record{
		ID: r.WorkerID, Service: r.Service, Address: r.Address, Port: r.Port,
		Engine: r.Engine, Model: r.Model, ModelID: r.ModelID, InstanceID: r.InstanceID,
		Meta: r.Meta(), Heartbeat: now, Expires: now.Add(ttl),
	}
}

// registration is the inverse of newRecord: readers take the record's own
// fields, which the writer fills from the same Registration as its meta,
// and from the meta what has no field of its own.
func (rec Record) registration() discovery.Registration {
	return discovery.Registration{
		Service: rec.Service, WorkerID: rec.ID, Address: rec.Address, Port: rec.Port,
		Engine: rec.Engine, Model: rec.Model, ModelID: rec.ModelID, InstanceID: rec.InstanceID,
		TokensOnly: discovery.FromMeta(rec.Meta).TokensOnly,
	}
}

func (f *Registry) write(r discovery.Registration) error {
	rec := newRecord(r, time.Now().UTC(), f.ttl)
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding worker record: %w", err)
	}
	path := Path(f.dir, r)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating registry directory: %w", err)
	}
	// Write and rename in the same directory, so readers see the old record
	// or the new one, never a partial one.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+r.WorkerID+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing worker record: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	// CreateTemp makes the file 0600; readers such as `vigil route` may
	// run as another user.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing worker record: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing worker record: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing worker record: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing worker record: %w", err)
	}
	return nil
}

// List returns the unexpired records of service under dir at time now,
// sorted by id. Unreadable and malformed records are skipped: a reader must
// not fail because one writer crashed mid-way on a filesystem without
// atomic rename.
func List(dir, service string, now time.Time) ([]Record, error) {
	entries, err := os.ReadDir(filepath.Join(dir, service))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing workers of %s: %w", service, err)
	}
	var out []Record
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, service, e.Name()))
		if err != nil {
			continue
		}
		var rec Record
		if json.Unmarshal(data, &rec) != nil || !now.Before(rec.Expires) {
			continue
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
