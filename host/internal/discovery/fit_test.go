package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// Every key vigil publishes fits Consul's limits on meta keys: the format
// it takes, at most 128 characters, no reserved prefix, at most 64 pairs.
func TestMetaKeysFitConsul(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	for _, k := range discovery.MetaKeys {
		if !format.MatchString(k) || len(k) > discovery.MaxMetaKey || strings.HasPrefix(k, "consul-") {
			t.Errorf("meta key %q does not fit Consul's rules", k)
		}
	}
	if n := len(worker.Meta()); n > discovery.MaxMetaPairs {
		t.Errorf("%d meta pairs, over Consul's %d", n, discovery.MaxMetaPairs)
	}
}

// A model path and a lifetime id over 512 bytes are published as a prefix
// and the hash of the whole: within the limit, distinct for distinct
// values, the same for the same value. The other values are left alone.
func TestFitShortens(t *testing.T) {
	t.Parallel()
	r := worker
	r.ModelID = "/models/" + strings.Repeat("é", 400) // 808 bytes, cut at a character boundary
	r.InstanceID = strings.Repeat("i", 600)
	r.Model = "llama"
	fitted, shortened, err := r.Fit()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(shortened) != "[model_id instance_id]" {
		t.Errorf("shortened %v, want [model_id instance_id]", shortened)
	}
	for k, v := range fitted.Meta() {
		if len(v) > discovery.MaxMetaValue {
			t.Errorf("meta %s is %d bytes, over %d", k, len(v), discovery.MaxMetaValue)
		}
		if !utf8.ValidString(v) {
			t.Errorf("meta %s is not valid UTF-8 after shortening", k)
		}
	}
	if !strings.HasPrefix(fitted.ModelID, "/models/é") || !strings.Contains(fitted.ModelID, "#sha256:") {
		t.Errorf("model_id published as %q, want its prefix and its hash", fitted.ModelID)
	}
	other := r
	other.InstanceID = strings.Repeat("i", 599) + "j" // same prefix, another id
	otherFitted, _, _ := other.Fit()
	again, _, _ := r.Fit()
	if otherFitted.InstanceID == fitted.InstanceID || again.InstanceID != fitted.InstanceID {
		t.Errorf("instance ids %q and %q: want distinct ids to stay distinct and one id to shorten alike", fitted.InstanceID, otherFitted.InstanceID)
	}
	if fitted.Model != r.Model || fitted.WorkerID != r.WorkerID {
		t.Errorf("Fit changed model or worker id: %+v", fitted)
	}
	short := worker
	if f, s, err := short.Fit(); err != nil || s != nil || f != short {
		t.Errorf("Fit of a registration within limits = %+v, %v, %v; want it unchanged", f, s, err)
	}
}

// A value the worker is routed by cannot be shortened: the announcer
// gives up with a *MetaError naming the key, sending nothing.
func TestAnnouncerRefusesUnfitMetadata(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key string
		set func(*discovery.Registration)
	}{
		{discovery.MetaModel, func(r *discovery.Registration) { r.Model = "/models/" + strings.Repeat("m", 600) }},
		{discovery.MetaWorkerID, func(r *discovery.Registration) { r.WorkerID = strings.Repeat("w", 513) }},
		{discovery.MetaEngine, func(r *discovery.Registration) { r.Engine = strings.Repeat("e", 513) }},
	} {
		t.Run(tc.key, func(t *testing.T) {
			rec := newRecorder(time.Hour)
			a := start(t, rec)
			r := worker
			tc.set(&r)
			a.Announce(r)
			select {
			case <-a.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the announcer did not give up")
			}
			var me *discovery.MetaError
			if err := a.Err(); !errors.As(err, &me) || me.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("Err = %v, want a MetaError naming %s", err, tc.key)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.calls) != 0 {
				t.Errorf("calls %v, want none: the registration cannot be sent", rec.calls)
			}
		})
	}
}

// A shortened value is logged once, however often the worker is
// announced again (not ready, then serving).
func TestShortenedLoggedOnce(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	a := discovery.NewAnnouncer(newRecorder(time.Hour), hclog.New(&hclog.LoggerOptions{Output: &buf}))
	r := worker
	r.ModelID = strings.Repeat("p", 700)
	for range 3 {
		a.Announce(r)
	}
	if n := strings.Count(buf.String(), "over the registry's limit"); n != 1 {
		t.Errorf("logged the shortening %d times, want once:\n%s", n, buf.String())
	}
}

// The registration's state, as OnState is told it: refused while the
// registry refuses the token, registered once it takes the worker,
// unregistered once renewals have failed for a TTL and after a withdrawal.
func TestAnnouncerState(t *testing.T) {
	t.Parallel()
	rec := newRecorder(300 * time.Millisecond)
	states := make(chan discovery.RegistrationState, 16)
	a := discovery.NewAnnouncer(rec, hclog.NewNullLogger())
	a.OnState(func(st discovery.RegistrationState) { states <- st })
	next := func(want discovery.RegistrationState) {
		t.Helper()
		select {
		case st := <-states:
			if st != want {
				t.Fatalf("state %s, want %s", st, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no state within 10s, want %s", want)
		}
	}
	rec.setFail("register", fmt.Errorf("%w: lacks permission 'service:write'", discovery.ErrPermissionDenied))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	a.Announce(worker)
	next(discovery.Refused)
	rec.setFail("register", nil) // the token was fixed
	next(discovery.Registered)
	rec.setFail("heartbeat", errors.New("connection refused"))
	next(discovery.Unregistered) // no renewal for a TTL: the check has lapsed
	rec.setFail("heartbeat", nil)
	next(discovery.Registered)
	if err := a.Withdraw(context.Background()); err != nil {
		t.Fatal(err)
	}
	next(discovery.Unregistered)
}
