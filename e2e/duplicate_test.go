package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

// checkTTL is the --check-ttl startVigil gives every vigil.
const checkTTL = 5 * time.Second

// ownerBound is issue 12's bound on a duplicate worker id: the later of two
// live vigils exits within it, and a vigil killed and restarted at once
// registers within it of the kill.
const ownerBound = checkTTL + time.Second

// registry is one discovery backend as these tests see it: where a worker
// is registered, and whose registration it is (its owner token and address).
type registry interface {
	opts(o vigilOpts) vigilOpts
	// waitOwner waits until the worker's registration, as clients see it,
	// satisfies cond and returns its owner and address with the time it
	// was seen.
	waitOwner(t *testing.T, workerID string, timeout time.Duration, cond func(owner, addr string) bool) (owner, addr string, at time.Time)
	// waitWritten is waitOwner at the backend vigil writes to, before it
	// reaches clients (Consul: the local agent, before its catalog sync).
	waitWritten(t *testing.T, workerID string, timeout time.Duration, cond func(owner string) bool) time.Time
}

type consulRegistry struct {
	c   *consulAgent
	svc string
}

func (r consulRegistry) opts(o vigilOpts) vigilOpts {
	o.consul, o.service = r.c, r.svc
	return o
}

func (r consulRegistry) waitOwner(t *testing.T, workerID string, timeout time.Duration, cond func(owner, addr string) bool) (string, string, time.Time) {
	t.Helper()
	var owner, address string
	_, at := r.c.passing(t, r.svc, timeout, func(es []*api.ServiceEntry) bool {
		for _, e := range es {
			if e.Service.Meta["worker_id"] == workerID {
				owner, address = e.Service.Meta["owner"], fmt.Sprintf("%s:%d", e.Service.Address, e.Service.Port)
				return cond(owner, address)
			}
		}
		return false
	})
	return owner, address, at
}

// waitWritten blocks on the agent's own view of the worker's service
// (hash-based blocking queries) until its owner satisfies cond.
func (r consulRegistry) waitWritten(t *testing.T, workerID string, timeout time.Duration, cond func(owner string) bool) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var hash string
	for {
		q := (&api.QueryOptions{WaitHash: hash, WaitTime: 10 * time.Second}).WithContext(ctx)
		svc, meta, err := r.c.Client.Agent().Service(r.svc+"-"+workerID, q)
		now := time.Now()
		switch {
		case err == nil && cond(svc.Meta["owner"]):
			return now
		case err == nil:
			hash = meta.LastContentHash
		case ctx.Err() != nil:
			t.Fatalf("the agent's service %s-%s did not reach the expected owner within %s: %v", r.svc, workerID, timeout, err)
		default: // absent: ask again without blocking
			hash = ""
			time.Sleep(10 * time.Millisecond)
		}
	}
}

type fileRegistry struct{ dir, svc string }

func (r fileRegistry) opts(o vigilOpts) vigilOpts {
	o.discovery, o.registry, o.service = "file", r.dir, r.svc
	return o
}

// router starts vigil route on the registry and waits until it knows
// want workers (0: none).
func (r fileRegistry) router(t *testing.T, want int) *router {
	t.Helper()
	rt := &router{GRPC: addr(freePort(t)), HTTP: addr(freePort(t))}
	rt.proc = startProc(t, "vigil route", vigilBin, "route", "--discovery", "file", "--registry-dir", r.dir,
		"--service-name", r.svc, "--listen", rt.GRPC, "--http-listen", rt.HTTP)
	rt.waitWorkers(t, want)
	return rt
}

func (r fileRegistry) waitOwner(t *testing.T, workerID string, timeout time.Duration, cond func(owner, addr string) bool) (string, string, time.Time) {
	t.Helper()
	path := filepath.Join(r.dir, r.svc, workerID+".json")
	deadline := time.Now().Add(timeout)
	for {
		// A file has no event to await without a watcher dependency.
		rec, at := waitFile(t, path, true, time.Until(deadline))
		a := fmt.Sprintf("%s:%d", rec.Address, rec.Port)
		if cond(rec.Owner, a) && at.Before(rec.Expires) {
			return rec.Owner, a, at
		}
		if at.After(deadline) {
			t.Fatalf("record %s: owner %s at %s, not as wanted within %s", path, rec.Owner, a, timeout)
		}
		time.Sleep(harness.FilePoll)
	}
}

// waitWritten is waitOwner: readers read the record vigil writes.
func (r fileRegistry) waitWritten(t *testing.T, workerID string, timeout time.Duration, cond func(owner string) bool) time.Time {
	t.Helper()
	_, _, at := r.waitOwner(t, workerID, timeout, func(o, _ string) bool { return cond(o) })
	return at
}

// backends are the discovery backends, each a subtest of
// TestDuplicateWorkerID.
func backends(t *testing.T) map[string]func(t *testing.T) registry {
	return map[string]func(t *testing.T) registry{
		"consul": func(t *testing.T) registry { return consulRegistry{consulFor(t), uniqueService(t)} },
		"file":   func(t *testing.T) registry { return fileRegistry{t.TempDir(), "llm"} },
	}
}

// TestDuplicateWorkerID: issue 12, case 1. Each registration carries the
// owner token of the vigil run that wrote it.
//
//   - live: two live vigils given one worker id. The later exits 78 within
//     the TTL + 1s, naming the first's address and --worker-id, and never
//     registers; the first stays registered and passing throughout, under
//     its own owner and address.
//   - restarted: a vigil SIGKILLed and restarted at once with the same id
//     (its registration still passing) is not refused: it takes the
//     registration over within the TTL + 1s of the kill (at the Consul
//     agent; its catalog, which clients read, follows within
//     registerBound).
//   - default ids: two vigils with the default --worker-id on 127.0.0.1:P
//     and 127.0.0.2:P are two workers.
func TestDuplicateWorkerID(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	for name, backend := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("live", func(t *testing.T) {
				t.Parallel()
				reg := backend(t)
				id := "dup-" + name
				m1, m2 := startMock(t, e, harness.MockOpts{}), startMock(t, e, harness.MockOpts{})
				first := startVigil(t, reg.opts(vigilOpts{engine: e, engineAddr: m1.GRPC, workerID: id}))
				owner, firstAddr, _ := reg.waitOwner(t, id, 30*time.Second, func(o, a string) bool { return a == first.Listen })
				stillFirst := func(o, a string) bool { return o == owner && a == first.Listen }

				// Watch, from here on, for the registration to be anything but
				// the first's.
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				changed := make(chan string, 1)
				go func() {
					defer close(changed)
					if c, ok := reg.(consulRegistry); ok {
						isFirst := func(es []*api.ServiceEntry) bool {
							return len(es) == 1 && es[0].Service.Meta["owner"] == owner && addr(es[0].Service.Port) == first.Listen
						}
						// The passing list may lag the catalog waitOwner read:
						// first see the first in it, then watch for a change.
						if _, _, err := c.c.Passing(ctx, c.svc, isFirst); err != nil {
							return
						}
						o := c.c.Observe(ctx, c.svc, func(es []*api.ServiceEntry) bool { return !isFirst(es) })
						if at, err := o.Wait(); err == nil {
							changed <- fmt.Sprintf("the passing list changed at %s", at.Format(time.RFC3339Nano))
						}
						return
					}
					f := reg.(fileRegistry)
					path := filepath.Join(f.dir, f.svc, id+".json")
					for ctx.Err() == nil {
						data, err := os.ReadFile(path)
						var rec fileRecord
						if err != nil || json.Unmarshal(data, &rec) != nil || rec.Owner != owner || !time.Now().Before(rec.Expires) {
							changed <- fmt.Sprintf("record %s: %s (error %v)", path, data, err)
							return
						}
						time.Sleep(harness.FilePoll)
					}
				}()

				second := startVigil(t, reg.opts(vigilOpts{engine: e, engineAddr: m2.GRPC, workerID: id}))
				out := second.exits(78, 30*time.Second, "duplicate worker id", firstAddr, "--worker-id")
				exitAt, _, _ := second.proc.Wait(exitBound) // exited: at once
				took := exitAt.Sub(second.Started)
				t.Logf("the later vigil exited 78 %s after it started", took)
				if took > ownerBound {
					t.Errorf("the later vigil exited %s after it started, want within the TTL + 1s (%s)", took, ownerBound)
				}
				if line := second.findLine("duplicate worker id"); !strings.Contains(line, "[ERROR]") {
					t.Errorf("the duplicate is not logged at error: %q", line)
				}
				if strings.Contains(out, "worker registered") {
					t.Errorf("the later vigil registered:\n%s", out)
				}

				// The first is unaffected: still registered as its own, still
				// renewing a TTL after the other left, still running.
				reg.waitOwner(t, id, checkTTL+registerBound, stillFirst)
				// Nothing to await: a registration left unrenewed would expire
				// within a TTL, which the watch above would see.
				time.Sleep(checkTTL)
				reg.waitOwner(t, id, registerBound, stillFirst)
				cancel()
				if msg, ok := <-changed; ok {
					t.Errorf("the first's registration did not stay its own: %s", msg)
				}
				if first.exited() {
					t.Fatalf("the first vigil exited with %d", first.exitCode())
				}
				if l := first.findLine("registry lost the worker"); l != "" {
					t.Errorf("the first vigil lost its registration: %s", l)
				}
				// And gets its traffic: requests to the address it advertises
				// reach its engine.
				if c := generate(context.Background(), workerClient(t, firstAddr), tokenPrompt("after-duplicate", 3, 1, 2), nil); c.err != nil || c.final == nil {
					t.Errorf("request to the first worker: %v", c.err)
				}
			})

			t.Run("restarted", func(t *testing.T) {
				t.Parallel()
				reg := backend(t)
				id := "restart-" + name
				m := startMock(t, e, harness.MockOpts{})
				listen := addr(freePort(t))
				killed := startVigil(t, reg.opts(vigilOpts{engine: e, engineAddr: m.GRPC, workerID: id, listen: listen}))
				owner, _, _ := reg.waitOwner(t, id, 30*time.Second, func(string, string) bool { return true })
				killed.signal(syscall.SIGKILL)
				killed.wait(exitBound)
				at := time.Now()

				restarted := startVigil(t, reg.opts(vigilOpts{engine: e, engineAddr: m.GRPC, workerID: id, listen: listen}))
				written := reg.waitWritten(t, id, ownerBound+10*time.Second, func(o string) bool { return o != owner })
				_, _, seen := reg.waitOwner(t, id, checkTTL+registerBound+10*time.Second, func(o, a string) bool { return o != owner && a == listen })
				t.Logf("the restarted vigil registered %s after the kill; clients saw it %s after", written.Sub(at), seen.Sub(at))
				if took := written.Sub(at); took > ownerBound {
					t.Errorf("registered %s after the kill, want within the TTL + 1s (%s)", took, ownerBound)
				}
				// Consul's catalog follows its agent within registerBound.
				if took := seen.Sub(at); took > checkTTL+registerBound {
					t.Errorf("clients saw the registration %s after the kill, want within the TTL + %s", took, registerBound)
				}
				restarted.waitLine("taking over the worker's registration", registerBound)
				if restarted.exited() {
					t.Fatalf("the restarted vigil exited with %d", restarted.exitCode())
				}
			})
		})
	}

	t.Run("default ids", func(t *testing.T) {
		t.Parallel()
		c := consulFor(t)
		svc := uniqueService(t)
		port := freePort(t)
		var vigils []*vigil
		for _, host := range []string{"127.0.0.1", "127.0.0.2"} {
			m := startMock(t, e, harness.MockOpts{})
			vigils = append(vigils, startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
				listen: fmt.Sprintf("%s:%d", host, port), defaultID: true}))
		}
		entries, _ := c.passing(t, svc, 30*time.Second, count(2))
		ids := map[string]string{}
		for _, en := range entries {
			ids[en.Service.Meta["worker_id"]] = fmt.Sprintf("%s:%d", en.Service.Address, en.Service.Port)
		}
		if len(ids) != 2 {
			t.Fatalf("worker ids %v, want two", ids)
		}
		for id, a := range ids {
			host, _, _ := strings.Cut(a, ":")
			if !strings.Contains(id, host) {
				t.Errorf("worker id %q of %s does not hold its listen host", id, a)
			}
		}
		for _, v := range vigils {
			if v.exited() {
				t.Errorf("vigil on %s exited with %d", v.Listen, v.exitCode())
			}
		}
	})
}

// TestFileRegistryClockStep: issue 12, case 7. A dead worker's record whose
// heartbeat and expiry lie in the future (its vigil crashed, and the clock
// was stepped back since) leaves the router's workers within the TTL and a
// poll of the rewrite; a live worker stays and gets the requests.
func TestFileRegistryClockStep(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir, svc := t.TempDir(), "llm"
	reg := fileRegistry{dir, svc}
	var workers []*vigil
	for range 2 {
		m := startMock(t, e, harness.MockOpts{})
		v := startVigil(t, reg.opts(vigilOpts{engine: e, engineAddr: m.GRPC}))
		v.waitLine("worker registered", 30*time.Second)
		workers = append(workers, v)
	}
	live, dead := workers[0], workers[1]

	r := &router{GRPC: addr(freePort(t)), HTTP: addr(freePort(t))}
	r.proc = startProc(t, "vigil route", vigilBin, "route", "--discovery", "file", "--registry-dir", dir,
		"--service-name", svc, "--listen", r.GRPC, "--http-listen", r.HTTP)
	for _, v := range workers {
		r.waitLine("worker joined: addr="+v.Listen, 30*time.Second)
	}

	dead.signal(syscall.SIGKILL)
	dead.wait(exitBound)
	// The record as the crashed vigil left it, its times an hour ahead of
	// this clock: every field kept, only the times moved.
	path := dead.RecordPath(dir, svc)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	hb := time.Now().Add(time.Hour).UTC()
	rec["heartbeat"], rec["expires"] = hb, hb.Add(checkTTL)
	if data, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	rewritten := time.Now()

	r.waitLine("worker left discovery: addr="+dead.Listen, checkTTL+10*time.Second)
	took := time.Since(rewritten)
	t.Logf("the dead worker left the router %s after its record was moved into the future", took)
	if took > checkTTL+time.Second {
		t.Errorf("left %s after the rewrite, want within the TTL + 1s (%s)", took, checkTTL+time.Second)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the dead worker's record: %v; want it still there, its times in the future", err)
	}
	if l := r.findLine("worker left discovery: addr=" + live.Listen); l != "" {
		t.Errorf("the live worker left the router: %s", l)
	}
	client := workerClient(t, r.GRPC)
	for i := range 3 {
		if c := generate(context.Background(), client, tokenPrompt(fmt.Sprintf("clock-step-%d", i), 3, 1, 2), nil); c.err != nil || c.final == nil {
			t.Errorf("request %d through the router: %v", i, c.err)
		}
	}
}
