package file_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/discoverytest"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
)

// owned is reg(id) as the vigil run with owner token owner publishes it.
func owned(id, owner string) discovery.Registration {
	r := reg(id)
	r.Owner = owner
	return r
}

// readRecord reads the record of r's worker.
func readRecord(t *testing.T, dir string, r discovery.Registration) file.Record {
	t.Helper()
	data, err := os.ReadFile(file.Path(dir, r))
	if err != nil {
		t.Fatal(err)
	}
	var rec file.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// A record is its owner's: another vigil given the same worker id neither
// renews it nor removes it, and learns whose it is from Claim.
func TestRecordOwner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	reg := file.New(dir, 5*time.Second)
	mine, theirs := owned("w1", "A"), owned("w1", "B")
	theirs.Address = "127.0.0.2"
	if err := reg.Register(ctx, mine); err != nil {
		t.Fatal(err)
	}
	rec := readRecord(t, dir, mine)
	if rec.Owner != "A" || rec.Meta["owner"] != "A" {
		t.Errorf("record owner %q, meta owner %q; want A", rec.Owner, rec.Meta["owner"])
	}

	c, ok, err := reg.Claim(ctx, theirs)
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v; want the record", ok, err)
	}
	if c.Owner != "A" || c.Addr() != "127.0.0.1:8470" || c.Stale || c.Renewal != rec.Heartbeat.Format(time.RFC3339Nano) || c.TTL != 5*time.Second {
		t.Errorf("Claim = %+v, want A's at 127.0.0.1:8470, fresh, renewed at its heartbeat %s, TTL 5s", c, rec.Heartbeat)
	}
	if err := reg.Heartbeat(ctx, theirs); !errors.Is(err, discovery.ErrNotRegistered) {
		t.Errorf("Heartbeat of another's record = %v, want ErrNotRegistered", err)
	}
	if err := reg.Deregister(ctx, theirs); !errors.Is(err, discovery.ErrNotRegistered) {
		t.Errorf("Deregister of another's record = %v, want ErrNotRegistered", err)
	}
	if got := readRecord(t, dir, mine); got.Owner != "A" || !got.Heartbeat.Equal(rec.Heartbeat) {
		t.Errorf("record after another's Heartbeat and Deregister: %+v, want A's, untouched", got)
	}

	// Its owner renews it (the heartbeat changes) and removes it.
	if err := reg.Heartbeat(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if c2, _, _ := reg.Claim(ctx, theirs); c2.Renewal == c.Renewal {
		t.Errorf("Claim after a renewal: renewal %q unchanged", c2.Renewal)
	}
	if err := reg.Deregister(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := reg.Claim(ctx, theirs); ok || err != nil {
		t.Errorf("Claim after Deregister = %v, %v; want none", ok, err)
	}
}

// A record whose expiry has passed is stale to a writer too.
func TestClaimStale(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := owned("w1", "A")
	if err := file.New(dir, time.Second).Register(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	rewrite(t, dir, r, time.Now().Add(-time.Minute), time.Second)
	c, ok, err := file.New(dir, time.Second).Claim(t.Context(), r)
	if err != nil || !ok || !c.Stale {
		t.Errorf("Claim of an expired record = %+v, %v, %v; want it, stale", c, ok, err)
	}
}

// rewrite sets the times of r's record: heartbeat at hb, expiring ttl
// later, as a writer whose clock read hb would have written it.
func rewrite(t *testing.T, dir string, r discovery.Registration, hb time.Time, ttl time.Duration) {
	t.Helper()
	rec := readRecord(t, dir, r)
	rec.Heartbeat, rec.Expires = hb.UTC(), hb.Add(ttl).UTC()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file.Path(dir, r), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTrackerBoundsByObservation: a reader drops a record whose heartbeat
// it has not seen change for the record's TTL on its own clock, whatever
// the record's times say; a record renewed within the TTL stays.
func TestTrackerBoundsByObservation(t *testing.T) {
	t.Parallel()
	ttl := 5 * time.Second
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) // the reader's clock
	future := t0.Add(time.Hour)                       // a writer's clock stepped back since
	rec := func(id string, hb time.Time) file.Record {
		return file.Record{ID: id, Address: "127.0.0.1", Port: 8470, Heartbeat: hb, Expires: hb.Add(ttl)}
	}
	ids := func(recs []file.Record) (out []string) {
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	var tr file.Tracker
	for _, step := range []struct {
		name string
		at   time.Duration // reader's time since t0
		recs []file.Record
		want []string
	}{
		{"first sight: both", 0, []file.Record{rec("dead", future), rec("live", t0)}, []string{"dead", "live"}},
		{"within the TTL", 4 * time.Second, []file.Record{rec("dead", future), rec("live", t0.Add(3*time.Second))}, []string{"dead", "live"}},
		{"dead: unchanged for the TTL", 5 * time.Second, []file.Record{rec("dead", future), rec("live", t0.Add(3*time.Second))}, []string{"live"}},
		{"live: its change seen 3s ago", 7 * time.Second, []file.Record{rec("dead", future), rec("live", t0.Add(3*time.Second))}, []string{"live"}},
		{"dead rewritten (taken over): back", 8 * time.Second, []file.Record{rec("dead", t0.Add(8*time.Second)), rec("live", t0.Add(8*time.Second))}, []string{"dead", "live"}},
		{"dead gone: forgotten", 9 * time.Second, []file.Record{rec("live", t0.Add(8*time.Second))}, []string{"live"}},
		{"back unchanged: kept for a TTL", 10 * time.Second, []file.Record{rec("dead", t0.Add(8*time.Second)), rec("live", t0.Add(10*time.Second))}, []string{"dead", "live"}},
		{"and dropped a TTL after it came back", 15 * time.Second, []file.Record{rec("dead", t0.Add(8*time.Second)), rec("live", t0.Add(13*time.Second))}, []string{"live"}},
		{"zero TTL: never fresh", 16 * time.Second, []file.Record{{ID: "odd", Address: "h", Port: 1, Heartbeat: future, Expires: future}}, nil},
	} {
		if diff := cmp.Diff(step.want, ids(tr.Fresh(step.recs, t0.Add(step.at)))); diff != "" {
			t.Errorf("%s (at %s): fresh records (-want +got):\n%s", step.name, step.at, diff)
		}
	}
}

// TestDiscovererDropsRecordNotRenewed: a record left with times in the
// future by a crashed writer drops out of the Discoverer's sets one TTL
// after the Discoverer first saw it.
func TestDiscovererDropsRecordNotRenewed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ttl := 300 * time.Millisecond
	dead := owned("w1", "A")
	if err := file.New(dir, ttl).Register(t.Context(), dead); err != nil {
		t.Fatal(err)
	}
	rewrite(t, dir, dead, time.Now().Add(time.Hour), ttl)
	// Before the watch: the discoverer first sees the record after this.
	seen := time.Now()
	sets := discoverytest.Watch(t, file.NewDiscoverer(dir, "llm", nil))
	if rs := discoverytest.Next(t, sets); len(rs) != 1 {
		t.Fatalf("first set = %v, want the record", rs)
	}
	if rs := discoverytest.Next(t, sets); len(rs) != 0 {
		t.Fatalf("second set = %v, want empty", rs)
	}
	if d := time.Since(seen); d < ttl || d > ttl+time.Second {
		t.Errorf("dropped %s after it was first seen, want one TTL (%s) and less than a second more", d, ttl)
	}
}
