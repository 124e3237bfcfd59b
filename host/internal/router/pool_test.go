package router

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

func TestPoolPick(t *testing.T) {
	t.Parallel()
	p := NewPool(PoolConfig{Balance: RoundRobin})
	defer p.Close()
	p.Update([]discovery.Registration{
		{WorkerID: "c", Address: "127.0.0.1", Port: 3, Model: "m2"},
		{WorkerID: "a", Address: "127.0.0.1", Port: 1, Model: "m1"},
		{WorkerID: "b", Address: "127.0.0.1", Port: 2, Model: "m1"},
	})
	pick := func(model string, tried map[string]bool) (string, codes.Code) {
		ep, _, release, err := p.Pick(Ask{Model: model}, tried)
		if err != nil {
			return "", status.Code(err)
		}
		release()
		release() // releasing twice is harmless
		return ep.WorkerID, codes.OK
	}
	var got []string
	for range 4 {
		id, _ := pick("m1", nil)
		got = append(got, id)
	}
	for range 3 {
		id, _ := pick("", nil)
		got = append(got, id)
	}
	if diff := cmp.Diff([]string{"a", "b", "a", "b", "a", "b", "c"}, got); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name   string
		model  string
		tried  map[string]bool
		wantID string
		want   codes.Code
	}{
		{"skips tried", "m1", map[string]bool{"127.0.0.1:1": true}, "b", codes.OK},
		{"all tried", "m1", map[string]bool{"127.0.0.1:1": true, "127.0.0.1:2": true}, "", codes.Unavailable},
		{"unknown model", "m3", nil, "", codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, code := pick(tc.model, tc.tried)
			if id != tc.wantID || code != tc.want {
				t.Errorf("got %q, %v; want %q, %v", id, code, tc.wantID, tc.want)
			}
		})
	}

	if diff := cmp.Diff([]string{"m1", "m2"}, p.Models()); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	p.Update(nil)
	if _, code := pick("m1", nil); code != codes.Unavailable {
		t.Errorf("empty pool: got %v, want Unavailable", code)
	}
}

func TestPoolClosesConnectionWhenIdle(t *testing.T) {
	t.Parallel()
	p := NewPool(PoolConfig{})
	defer p.Close()
	a := discovery.Registration{WorkerID: "a", Address: "127.0.0.1", Port: 1, Model: "m"}
	b := discovery.Registration{WorkerID: "b", Address: "127.0.0.1", Port: 2, Model: "m"}
	p.Update([]discovery.Registration{a, b})

	_, busy, release, err := p.Pick(Ask{Model: "m"}, map[string]bool{b.Addr(): true})
	if err != nil {
		t.Fatal(err)
	}
	_, idle, releaseB, err := p.Pick(Ask{Model: "m"}, map[string]bool{a.Addr(): true})
	if err != nil {
		t.Fatal(err)
	}
	releaseB()

	// Both leave discovery: the idle connection closes at once, the busy
	// one when its stream ends.
	p.Update(nil)
	if s := idle.GetState(); s != connectivity.Shutdown {
		t.Errorf("idle connection: %v, want Shutdown", s)
	}
	if s := busy.GetState(); s == connectivity.Shutdown {
		t.Errorf("busy connection closed while in use")
	}
	release()
	if s := busy.GetState(); s != connectivity.Shutdown {
		t.Errorf("busy connection after its stream ended: %v, want Shutdown", s)
	}
}

func TestPoolClose(t *testing.T) {
	t.Parallel()
	p := NewPool(PoolConfig{})
	p.Update([]discovery.Registration{{WorkerID: "a", Address: "127.0.0.1", Port: 1}})
	_, cc, release, err := p.Pick(Ask{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	if s := cc.GetState(); s == connectivity.Shutdown {
		t.Errorf("connection in use closed by Close")
	}
	release()
	if s := cc.GetState(); s != connectivity.Shutdown {
		t.Errorf("connection after its stream ended: %v, want Shutdown", s)
	}
	p.Update([]discovery.Registration{{WorkerID: "a", Address: "127.0.0.1", Port: 1}})
	if serving, n := p.Ready(); serving || n != 0 {
		t.Errorf("Update after Close: serving %v, %d workers; want not serving, 0 workers", serving, n)
	}
	if _, _, _, err := p.Pick(Ask{}, nil); status.Code(err) != codes.Unavailable {
		t.Errorf("Pick after Close: %v, want Unavailable", err)
	}
}

// TestPoolPickPromptKind: a text prompt goes only to workers that take
// text; when every worker of the model takes token ids only, it is refused
// naming prompt, and token prompts go to all.
func TestPoolPickPromptKind(t *testing.T) {
	t.Parallel()
	p := NewPool(PoolConfig{Balance: RoundRobin})
	defer p.Close()
	p.Update([]discovery.Registration{
		{WorkerID: "text", Address: "127.0.0.1", Port: 1, Model: "m"},
		{WorkerID: "tokens", Address: "127.0.0.1", Port: 2, Model: "m", TokensOnly: true},
		{WorkerID: "tokens2", Address: "127.0.0.1", Port: 3, Model: "t", TokensOnly: true},
	})
	tests := map[string]struct {
		ask     Ask
		want    []string // workers picked by successive attempts, none tried
		code    codes.Code
		message string
	}{
		"text goes to text workers":   {ask: Ask{Model: "m", Text: true}, want: []string{"text", "text"}},
		"token ids go to all":         {ask: Ask{Model: "m"}, want: []string{"text", "tokens"}},
		"text to token-only workers":  {ask: Ask{Model: "t", Text: true}, code: codes.InvalidArgument, message: `prompt: the workers of model "t" take token ids only, not text`},
		"text, any model":             {ask: Ask{Text: true}, want: []string{"text", "text"}},
		"unknown model is not prompt": {ask: Ask{Model: "x", Text: true}, code: codes.NotFound},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for range max(len(tt.want), 1) {
				ep, _, release, err := p.Pick(tt.ask, nil)
				if err != nil {
					if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.message) {
						t.Fatalf("Pick(%+v) = %v, want %v %q", tt.ask, err, tt.code, tt.message)
					}
					return
				}
				release()
				got = append(got, ep.WorkerID)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("picks (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeClock is a PoolConfig.Now that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestPoolRemembersModels: a model whose workers all left discovery is
// UNAVAILABLE (retry later) for the memory after its last worker left, a
// model given in PoolConfig.Models always, and only a model never seen (or
// forgotten) is NOT_FOUND; with no worker at all nothing is NOT_FOUND.
func TestPoolRemembersModels(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := NewPool(PoolConfig{Models: []string{"pinned"}, Now: clock.Now})
	defer p.Close()
	a := discovery.Registration{WorkerID: "a", Address: "127.0.0.1", Port: 1, Model: "A"}
	b := discovery.Registration{WorkerID: "b", Address: "127.0.0.1", Port: 2, Model: "B"}
	pick := func(step, model string, want codes.Code, msg string) {
		t.Helper()
		_, _, release, err := p.Pick(Ask{Model: model}, nil)
		if err == nil {
			release()
		}
		if status.Code(err) != want || !strings.Contains(status.Convert(err).Message(), msg) {
			t.Errorf("%s: Pick(%q) = %v, want %v with %q", step, model, err, want, msg)
		}
	}

	pick("before discovery answers", "A", codes.Unavailable, "no workers available")
	p.Update([]discovery.Registration{a, b})
	pick("served", "A", codes.OK, "")
	pick("never seen", "C", codes.NotFound, `no worker serves model "C", nor did one in the last 10m0s`)
	pick("pinned, never seen", "pinned", codes.Unavailable, "--model")

	p.Update([]discovery.Registration{b}) // A's engine sleeps
	pick("just withdrawn", "A", codes.Unavailable, `no worker of model "A" serves now (its last worker left discovery 0s ago)`)
	clock.advance(5 * time.Minute)
	p.Update([]discovery.Registration{b}) // later sets without A do not renew it
	clock.advance(5 * time.Minute)
	pick("withdrawn for the whole memory", "A", codes.Unavailable, "left discovery 10m0s ago")
	clock.advance(time.Second)
	pick("past the memory", "A", codes.NotFound, `no worker serves model "A"`)
	pick("pinned, much later", "pinned", codes.Unavailable, "--model")

	p.Update([]discovery.Registration{a, b}) // A is back, and leaves again
	p.Update([]discovery.Registration{b})
	clock.advance(time.Minute)
	pick("withdrawn again", "A", codes.Unavailable, "left discovery 1m0s ago")

	p.Update(nil) // no worker at all: unknown is not provable
	pick("no workers, never seen", "C", codes.Unavailable, "no workers available")
	pick("no workers, B just withdrawn", "B", codes.Unavailable, `model "B"`)
	clock.advance(time.Hour)
	p.Update(nil)
	pick("no workers, A forgotten", "A", codes.Unavailable, "no workers available")
}

// A quarantined entry is never picked while discovery lists it unchanged;
// with every entry of the model quarantined, Pick says UNAVAILABLE; a
// change of the entry frees it.
func TestPoolQuarantine(t *testing.T) {
	t.Parallel()
	p := NewPool(PoolConfig{Rand: seeded()})
	defer p.Close()
	eps := fleet(2, "m")
	p.Update(eps)
	p.Quarantine(eps[0], "someone-else")
	p.Update(eps)
	for i := range 50 {
		ep, _, rel, err := p.Pick(Ask{Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		if ep == eps[0] {
			t.Fatalf("pick %d went to the quarantined entry", i)
		}
	}
	p.Quarantine(eps[1], "someone-else")
	if _, _, _, err := p.Pick(Ask{Model: "m"}, nil); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "stale") {
		t.Errorf("every entry quarantined: %v, want UNAVAILABLE saying they are stale", err)
	}
	changed := slices.Clone(eps)
	changed[0].InstanceID = "restarted"
	p.Update(changed)
	ep, _, rel, err := p.Pick(Ask{Model: "m"}, nil)
	if err != nil || ep != changed[0] {
		t.Fatalf("after discovery changed it: %v, %v; want the changed entry", ep, err)
	}
	rel()
}
