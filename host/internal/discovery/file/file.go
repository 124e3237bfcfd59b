// Package file is the embedded discovery backend, both halves: a
// [Registry] that keeps one JSON record per worker at
// <dir>/<service>/<worker-id>.json, rewritten atomically on every heartbeat
// and removed on withdrawal, and a [Discoverer] that polls the directory.
// Readers skip records whose expiry time has passed, so a worker whose
// vigil was killed drops out after one TTL; and, not trusting the writer's
// clock alone, records whose heartbeat they have not seen change for one
// TTL by their own clock ([Tracker]), so that a record left with times in
// the future (a clock stepped back after its vigil crashed) drops out too.
// A record listed but not read (ESTALE or ENOENT on a shared volume while
// its writer renames a new one into place) counts, for a reader, as the one
// it last read of that file until its own expiry ([Keeper]).
//
// A record holds its writer's owner token: the Registry rewrites or
// removes only its own, and reads the record before each write.
package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
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
	// Owner is the owner token of the vigil run that wrote the record
	// (discovery.Registration.Owner).
	Owner string `json:"owner,omitempty"`
	// Heartbeat is when the record was last written, by the writer's
	// clock.
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

// MaxWorkerID is the longest worker id, in bytes, whose files fit a file
// name (NAME_MAX, 255 bytes on Linux and macOS): the record is
// <worker-id>.json, and it is written through a temporary file
// .<worker-id>.<up to 10 digits>.tmp, the longer of the two.
const MaxWorkerID = 255 - len(".") - len(".4294967295.tmp")

// Path is where the record of r lives.
func Path(dir string, r discovery.Registration) string {
	return filepath.Join(dir, r.Service, r.WorkerID+".json")
}

// Register writes the record.
func (f *Registry) Register(_ context.Context, r discovery.Registration) error {
	return f.write(r)
}

// Heartbeat rewrites the record with a new expiry. A record deleted from
// under the worker is written again; another owner's record of the worker
// is left as it is, and the error wraps discovery.ErrNotRegistered.
func (f *Registry) Heartbeat(ctx context.Context, r discovery.Registration) error {
	if err := f.mine(ctx, r); err != nil {
		return err
	}
	return f.write(r)
}

// Deregister removes the record, unless it is another owner's: that is
// left, and the error wraps discovery.ErrNotRegistered.
func (f *Registry) Deregister(ctx context.Context, r discovery.Registration) error {
	if err := f.mine(ctx, r); err != nil {
		return err
	}
	if err := os.Remove(Path(f.dir, r)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing worker record: %w", err)
	}
	return nil
}

// mine returns an error unless the record of r's worker is absent or
// r.Owner's.
func (f *Registry) mine(ctx context.Context, r discovery.Registration) error {
	c, ok, err := f.Claim(ctx, r)
	switch {
	case err != nil:
		return err
	case ok && c.Owner != r.Owner:
		return fmt.Errorf("%w: record %s is another vigil's, advertising %s (owner %s)",
			discovery.ErrNotRegistered, Path(f.dir, r), c.Addr(), c.Owner)
	}
	return nil
}

// Claim reads the record of r's worker: its owner, its heartbeat as the
// renewal, its TTL, and stale once its expiry has passed by this clock. A record
// that does not parse (torn by a crash on a filesystem without atomic
// rename) counts as none.
func (f *Registry) Claim(_ context.Context, r discovery.Registration) (discovery.Claim, bool, error) {
	data, err := os.ReadFile(Path(f.dir, r))
	if errors.Is(err, fs.ErrNotExist) {
		return discovery.Claim{}, false, nil
	}
	if err != nil {
		return discovery.Claim{}, false, fmt.Errorf("reading worker record: %w", err)
	}
	var rec Record
	if json.Unmarshal(data, &rec) != nil {
		return discovery.Claim{}, false, nil
	}
	return discovery.Claim{
		Owner: rec.Owner, Address: rec.Address, Port: rec.Port,
		Renewal: rec.Heartbeat.Format(time.RFC3339Nano), Stale: !time.Now().Before(rec.Expires),
		TTL: rec.Expires.Sub(rec.Heartbeat),
	}, true, nil
}

// newRecord is r's record written at now, fresh for ttl.
func newRecord(r discovery.Registration, now time.Time, ttl time.Duration) Record {
	return Record{
		ID: r.WorkerID, Service: r.Service, Address: r.Address, Port: r.Port,
		Engine: r.Engine, Model: r.Model, ModelID: r.ModelID, InstanceID: r.InstanceID,
		Meta: r.Meta(), Owner: r.Owner, Heartbeat: now, Expires: now.Add(ttl),
	}
}

// registration is the inverse of newRecord: readers take the record's own
// fields, which the writer fills from the same Registration as its meta,
// and from the meta what has no field of its own. It refuses a record
// whose meta no current vigil writes (discovery.FromMeta).
func (rec Record) registration() (discovery.Registration, error) {
	// From the metadata, as Consul's reader, so that what it adds (caps)
	// is never dropped here; the record's own fields take precedence.
	r, err := discovery.FromMeta(rec.Meta)
	if err != nil {
		return discovery.Registration{}, err
	}
	r.Service, r.WorkerID, r.Address, r.Port = rec.Service, rec.ID, rec.Address, rec.Port
	r.Engine, r.Model, r.ModelID, r.InstanceID, r.Owner = rec.Engine, rec.Model, rec.ModelID, rec.InstanceID, rec.Owner
	return r, nil
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
// sorted by id: those whose expiry, by their writer's clock, is after now.
// A reader that lists more than once also bounds them by what it observes:
// see Tracker. Unreadable and malformed records are skipped: a reader must
// not fail because one writer crashed mid-way on a filesystem without
// atomic rename.
func List(dir, service string, now time.Time) ([]Record, error) {
	read, _, err := list(os.DirFS(dir), service)
	if err != nil {
		return nil, err
	}
	return unexpired(read, now), nil
}

// list reads the records of service in fsys, by file name; it also returns
// the names of those listed but not read (a read error, or malformed
// content), for a reader to keep what it last read of them (Keeper).
func list(fsys fs.FS, service string) (read map[string]Record, unread []string, err error) {
	entries, err := fs.ReadDir(fsys, service)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing workers of %s: %w", service, err)
	}
	read = make(map[string]Record, len(entries))
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join(service, e.Name()))
		var rec Record
		if err != nil || json.Unmarshal(data, &rec) != nil {
			unread = append(unread, e.Name())
			continue
		}
		read[e.Name()] = rec
	}
	return read, unread, nil
}

// unexpired returns the records of read whose expiry is after now, sorted
// by id.
func unexpired(read map[string]Record, now time.Time) []Record {
	var out []Record
	for _, rec := range read {
		if now.Before(rec.Expires) {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Keeper keeps, for one reader, the last record read of each file: a
// record listed but not read this time (ESTALE or ENOENT on a shared
// volume while its writer renames a new one into place, a torn write) is
// taken as last read until that record's own expiry, so that one failed
// read does not drop a live worker for a poll. A file no longer listed is
// forgotten at once: its writer removed it. The zero value is ready; it is
// not safe for concurrent use.
type Keeper struct {
	last map[string]Record // by file name
}

// Keep returns the unexpired records of read (by file name) and, for each
// file of unread, of the last record read of it, sorted by id.
func (k *Keeper) Keep(read map[string]Record, unread []string, now time.Time) []Record {
	if read == nil {
		read = make(map[string]Record, len(unread))
	}
	for _, name := range unread {
		if rec, ok := k.last[name]; ok {
			read[name] = rec
		}
	}
	k.last = read
	return unexpired(read, now)
}

// Tracker bounds the life of the records one reader lists by what it
// observes, not only by the writer's timestamps: a record whose heartbeat
// has not changed for its TTL (expires − heartbeat, as written), measured
// by the reader's clock from when it first saw that heartbeat, is expired.
// A vigil rewrites its record every third of the TTL, so a live worker's
// heartbeat changes well within it; a record whose times lie in the future
// (its writer's clock was stepped back after it crashed) drops out one TTL
// after the reader first saw it. The zero value is ready; it is not safe
// for concurrent use.
type Tracker struct {
	seen map[trackKey]sighting
}

type trackKey struct{ id, addr string }

// sighting is a record's heartbeat and when the reader first saw it.
type sighting struct {
	heartbeat time.Time
	since     time.Time
}

// Fresh returns the records of recs (a List at now) that are not expired
// by observation, in their order, reusing recs' array. now must come from
// the same clock on every call: time.Now, whose monotonic reading ignores
// steps of the wall clock.
func (t *Tracker) Fresh(recs []Record, now time.Time) []Record {
	seen := make(map[trackKey]sighting, len(recs))
	out := recs[:0]
	for _, rec := range recs {
		k := trackKey{rec.ID, net.JoinHostPort(rec.Address, strconv.Itoa(rec.Port))}
		s, ok := t.seen[k]
		if !ok || !s.heartbeat.Equal(rec.Heartbeat) {
			s = sighting{heartbeat: rec.Heartbeat, since: now}
		}
		seen[k] = s
		if now.Sub(s.since) < rec.Expires.Sub(rec.Heartbeat) {
			out = append(out, rec)
		}
	}
	t.seen = seen // records no longer listed are forgotten
	return out
}
