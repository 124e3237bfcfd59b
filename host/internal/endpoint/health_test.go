package endpoint

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// The readiness service ("") serves only while the worker admits; the
// liveness service serves from the start, through not-ready, until
// Stopping.
func TestHealthReadinessAndLiveness(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(lis, 0, hclog.NewNullLogger())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve() }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { conn.Close(); s.Close(); <-done }()
	h := healthpb.NewHealthClient(conn)
	check := func(service string) string {
		r, err := h.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return status.Code(err).String()
		}
		return r.GetStatus().String()
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"starting", func() {}},
		{"attached, admitting", func() { s.Attach(&fakeEngine{}, worker); s.Admit(true, "") }},
		{"not ready", func() { s.Admit(false, "worker not ready") }},
		{"stopping", func() { s.Stopping() }},
	}
	want := map[string][3]string{
		"starting":            {"NOT_SERVING", "NOT_SERVING", "SERVING"},
		"attached, admitting": {"SERVING", "SERVING", "SERVING"},
		"not ready":           {"NOT_SERVING", "NOT_SERVING", "SERVING"},
		"stopping":            {"NOT_SERVING", "NOT_SERVING", "NOT_SERVING"},
	}
	for _, st := range steps {
		st.do()
		got := [3]string{check(""), check(workerv1.Worker_ServiceDesc.ServiceName), check(workerapi.LivenessService)}
		if got != want[st.name] {
			t.Errorf("%s: health (\"\", worker, %s) = %v, want %v", st.name, workerapi.LivenessService, got, want[st.name])
		}
	}
	// Once stopping, readiness stays refused whatever is admitted.
	s.Admit(true, "")
	if got := check(workerapi.LivenessService); got != "NOT_SERVING" {
		t.Errorf("liveness after Stopping and Admit = %s, want NOT_SERVING", got)
	}
}

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu                 sync.Mutex
	outcomes           []Outcome
	prompt, completion uint32
}

func (r *recorder) Finished(o Outcome, p, c uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, o)
	r.prompt += p
	r.completion += c
}

func (r *recorder) last() Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.outcomes) == 0 {
		return -1
	}
	return r.outcomes[len(r.outcomes)-1]
}

// Every request the handler sees is reported once, with its outcome and
// its tokens.
func TestObserverOutcomes(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{}
	s, c := serve(t, e, worker, 1)
	rec := &recorder{}
	s.Observe(rec)

	if r := run(t.Context(), c, prompt(1)); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("before Admit: %v, want Unavailable", r.err)
	}
	if got := rec.last(); got != OutcomeRefused {
		t.Errorf("refused request: outcome %s, want %s", got, OutcomeRefused)
	}
	s.Admit(true, "")
	if r := run(t.Context(), c, prompt(1)); r.err != nil {
		t.Fatal(r.err)
	}
	if got := rec.last(); got != OutcomeOK {
		t.Errorf("finished request: outcome %s, want %s", got, OutcomeOK)
	}
	if rec.prompt != 1 || rec.completion != 2 {
		t.Errorf("tokens: prompt %d completion %d, want 1 and 2 (the engine's usage)", rec.prompt, rec.completion)
	}
	if r := run(t.Context(), c, &workerv1.GenerateRequest{Model: "x", Prompt: prompt(1).Prompt}); status.Code(r.err) != codes.NotFound {
		t.Fatalf("other model: %v, want NotFound", r.err)
	}
	if got := rec.last(); got != OutcomeInvalid {
		t.Errorf("invalid request: outcome %s, want %s", got, OutcomeInvalid)
	}

	// A held request fills --max-inflight 1: the next is overloaded; the
	// held one, cancelled by its client, is cancelled.
	e.hold, e.started = make(chan struct{}), make(chan string, 1)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan result, 1)
	go func() { first <- run(ctx, c, prompt(1)) }()
	<-e.started
	if r := run(t.Context(), c, prompt(1)); status.Code(r.err) != codes.ResourceExhausted {
		t.Fatalf("second request: %v, want ResourceExhausted", r.err)
	}
	if got := rec.last(); got != OutcomeOverloaded {
		t.Errorf("request over --max-inflight: outcome %s, want %s", got, OutcomeOverloaded)
	}
	cancel()
	<-first
	deadline := time.Now().Add(5 * time.Second)
	for rec.last() != OutcomeCancelled && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the handler returns after the client saw the cancel
	}
	if got := rec.last(); got != OutcomeCancelled {
		t.Errorf("cancelled request: outcome %s, want %s", got, OutcomeCancelled)
	}
}

func TestOutcomeStrings(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for o := range NumOutcomes {
		s := Outcome(o).String()
		if s == "unknown" || seen[s] {
			t.Errorf("Outcome(%d).String() = %q: want a distinct name", o, s)
		}
		seen[s] = true
	}
	if got := fmt.Sprint(Outcome(NumOutcomes)); got != "unknown" {
		t.Errorf("Outcome(NumOutcomes) = %q, want unknown", got)
	}
}

// The registration service is NOT_SERVING until the registry holds the
// worker, and follows what it is told.
func TestHealthRegistration(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(lis, 0, hclog.NewNullLogger())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve() }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { conn.Close(); s.Close(); <-done }()
	h := healthpb.NewHealthClient(conn)
	for _, step := range []struct {
		held bool
		want healthpb.HealthCheckResponse_ServingStatus
	}{{false, healthpb.HealthCheckResponse_NOT_SERVING}, {true, healthpb.HealthCheckResponse_SERVING}, {false, healthpb.HealthCheckResponse_NOT_SERVING}} {
		if step.held {
			s.Attach(&fakeEngine{}, worker)
			s.Admit(true, "")
			s.Registered(true)
		} else if step.want == healthpb.HealthCheckResponse_NOT_SERVING {
			s.Registered(false)
		}
		r, err := h.Check(t.Context(), &healthpb.HealthCheckRequest{Service: workerapi.RegistrationService})
		if err != nil || r.GetStatus() != step.want {
			t.Errorf("registered %v: %s = %v, %v; want %v", step.held, workerapi.RegistrationService, r.GetStatus(), err, step.want)
		}
		// Readiness is the engine's business, not the registry's.
		if r, _ := h.Check(t.Context(), &healthpb.HealthCheckRequest{}); step.held && r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("readiness %v while registered, want SERVING", r.GetStatus())
		}
	}
}
