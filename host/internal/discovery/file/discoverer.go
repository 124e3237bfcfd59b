package file

import (
	"context"
	"io/fs"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// PollInterval is how often a Discoverer lists the registry directory.
// Polling needs no file-watching dependency (and works on filesystems
// without change notification); 100ms bounds how long a withdrawn worker
// can still be picked, at the cost of a directory read.
const PollInterval = 100 * time.Millisecond

// Discoverer is a discovery.Discoverer over the directory: it lists the
// unexpired records of its service every PollInterval. Records expire on
// their own (List skips them), so a worker whose vigil was killed drops out
// one TTL after its last heartbeat; and a record whose heartbeat the
// Discoverer has not seen change for one TTL drops out too (Tracker), so
// that future timestamps cannot keep a dead worker listed.
//
// A record listed but not read (ESTALE or ENOENT on a shared volume while
// its writer renames a new one into place) counts as the record last read
// of that file until its own expiry (Keeper).
type Discoverer struct {
	dir, service string
	fsys         fs.FS // the directory; tests inject read failures
	interval     time.Duration
	log          hclog.Logger
}

var _ discovery.Discoverer = (*Discoverer)(nil)

// NewDiscoverer returns a Discoverer of service's workers under dir; log
// may be nil.
func NewDiscoverer(dir, service string, log hclog.Logger) *Discoverer {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Discoverer{dir: dir, service: service, fsys: os.DirFS(dir), interval: PollInterval, log: log}
}

func (d *Discoverer) String() string { return "file " + d.dir }

// Run polls every PollInterval until ctx ends.
func (d *Discoverer) Run(ctx context.Context, update func([]discovery.Registration)) {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	changed := discovery.OnChange(update)
	var (
		failures discovery.Failures
		tracker  Tracker
		keeper   Keeper
		skips    discovery.Skips
	)
	for {
		now := time.Now()
		read, unread, err := list(d.fsys, d.service)
		if err != nil {
			failures.Fail(d.log, "cannot list the file registry; keeping the last set of workers",
				"dir", d.dir, "service", d.service, "error", err)
		} else {
			failures.Recover(d.log, "file registry readable again", "dir", d.dir)
			if unread != nil {
				d.log.Debug("worker records listed but not read; keeping the last read of each", "dir", d.dir, "files", unread)
			}
			recs := tracker.Fresh(keeper.Keep(read, unread, now), now)
			rs := make([]discovery.Registration, 0, len(recs))
			for _, rec := range recs {
				r, err := rec.registration()
				if err != nil {
					skips.Skip(d.log, rec.ID, err, "dir", d.dir, "service", d.service)
					continue
				}
				rs = append(rs, r)
			}
			skips.Read()
			changed(rs)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
