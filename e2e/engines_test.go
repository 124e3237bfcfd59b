package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	vllmmock "github.com/vigilhq/vigil/plugins/vllm/mock"
	"github.com/vigilhq/vigil/sdk/enginemock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The engine table: one row per engine vigil supervises, and one per older
// API of an engine that vigil follows in another way (a harness.Engine
// Variant: sglang-scheduler). The scenarios that depend on the engine
// adapter (registration with the engine's meta, the startup wait, a
// liveness signal failing at startup, loss in each way, a frozen engine,
// an engine replaced at its address, not-ready and back, the startup
// deadline, requests through the worker and the router, a third-party
// adapter, the adapter killed in a loop, requests the grace period cuts
// aborted at the engine) run as a subtest per row, TestX/<row>; a scenario the engine
// cannot take part in skips, saying why, by a field of its row. The tests of
// engine-independent behaviour (file registry, Consul restart, outages,
// latency and clusters, vigil killed, a loss during registration, duplicate
// worker ids, signals and broken log output, drain and its bound, router
// spreading, failover and edge cases, flags) run once, with the first row.
//
// A new engine adds:
//   - a row below, whose harness.Engine (in e2e/harness, which the
//     benchmarks share) builds and starts its mock;
//   - its mock, serving the control surface harness.Mock speaks (GET /state
//     with harness.MockState's fields; POST paths for whatever the row's
//     hooks use);
//   - its engine-specific cases, in the row's specific field: see there.
var engines = []*engine{
	{
		Engine:        harness.VLLM,
		model:         "test-model",
		servedModel:   "test-model",
		modelID:       "test-model",
		lifetimeID:    true,
		textPrompts:   true,
		seeds:         true,
		minP:          true,
		maxModelLen:   4096, // vllm-mock's default
		outputToken:   vllmmock.OutputToken,
		tokenText:     vllmmock.TokenText,
		unhealthy:     serverNotServing,
		livenessFails: serverLivenessFails(`health of \"\"`), // as hclog quotes it in the error
		// "lost", or "draining" taken for a loss by the suite's
		// --drain-timeout 0 (its NOT_SERVING).
		lostReason: "vLLM engine ",
		drains:     true, // its shutdown grace period
		watchModes: vllmWatchModes,
		// Every one of vllm-mock's other Watch modes leaves vigil polling.
		pollOnly: vllmWatchModes,
		notReady: []notReadyWay{
			{"sleep", "/sleep", "/wake"},
			{"pause", "/pause", "/resume"},
		},
		specific: []engineCase{
			{"readiness service withdraws without loss", vllmReadinessService},
		},
	},
	{
		// SGLang's runtime API: vigil follows WatchEngineState and polls
		// HealthCheck. sglang-mock derives both from its "" health, so
		// POST /health on "" stands for an engine turning unhealthy
		// (HealthCheck healthy false, a snapshot UNHEALTHY). The state
		// stream always streams: no Watch modes, nothing polled alone.
		Engine:        harness.SGLang,
		model:         "test-model",
		servedModel:   "test-model",
		modelID:       "test-model",
		lifetimeID:    true,
		textPrompts:   false, // SGLang takes token ids only
		minP:          true,
		maxModelLen:   harness.SGLangContextLength,
		outputToken:   enginemock.OutputToken,
		unhealthy:     serverNotServing,
		livenessFails: serverLivenessFails("HealthCheck: healthy is false"),
		lostReason:    "SGLang engine lost",
		drains:        true, // Tonic's graceful shutdown
		// SGLang has no sleep; PauseGeneration and ContinueGeneration.
		notReady: []notReadyWay{{"pause", "/pause", "/resume"}},
		specific: []engineCase{
			{"new instance id in the state stream is lost", sglangReplacedInStream},
		},
	},
	{
		// An older SGLang server (sglang.grpc.scheduler): grpc.health.v1
		// alone, "" liveness and the scheduler's service readiness, a
		// Watch that sends one status and ends, so vigil polls. It reports
		// no model and no lifetime id, and takes no requests through vigil:
		// the lifecycle scenarios run, the request ones skip. The issue's
		// "registers, and its NOT_SERVING is a loss" is
		// TestRegistersWhileEngineServes/sglang-scheduler and
		// TestEngineLost/sglang-scheduler/NOT_SERVING.
		Engine: harness.SGLangScheduler,
		model:  "test-model",
		// servedModel, modelID: none reported; --served-model-name names it.
		lifecycleOnly: true,
		unhealthy:     serverNotServing,
		livenessFails: serverLivenessFails(`health of \"\"`),
		lostReason:    "SGLang engine lost",
		pollOnly:      []mockVariant{{"watch once", nil}},
		notReady:      []notReadyWay{{"pause", "/pause", "/resume"}},
		specific: []engineCase{
			{"requests refused naming the older API", sglangSchedulerRefusesRequests},
		},
	},
	// TensorRT-LLM has no lifetime id, no text prompts, no health Watch,
	// no sleep or pause, and vigil no adapter executable for it: those
	// fields stay zero, and the scenarios needing them skip.
	{
		Engine: harness.TRTLLM,
		// The engine has no served name: model_id, often a path, is it.
		model:       "/models/test-model",
		servedModel: "/models/test-model",
		modelID:     "/models/test-model",
		seeds:       true,
		minP:        true,
		maxModelLen: 4096, // trtllm-mock's max_seq_len
		outputToken: enginemock.OutputToken,
		// A crashed rank: trtllm-mock's HealthCheck, derived from its ""
		// health, answers a description, the process staying up.
		unhealthy:     lossWay{"crashed rank", serverNotServing.lose},
		livenessFails: serverLivenessFails("HealthCheck"),
		lostReason:    "TensorRT-LLM engine lost",
		// HealthCheck, polled, is the engine's only health signal.
		pollOnly: []mockVariant{{"HealthCheck polled", nil}},
		specific: trtllmCases,
	},
}

// vllmWatchModes are the ways vllm-mock can answer a health Watch besides
// streaming every change, as vLLM does.
var vllmWatchModes = []mockVariant{
	{"watch once", []string{"--health-watch", "once"}},
	{"watch unimplemented", []string{"--health-watch", "unimplemented"}},
	{"watch silent", []string{"--health-watch", "silent"}},
}

// serverNotServing turns the whole server's health ("" in grpc.health.v1)
// NOT_SERVING, the engine's process staying up. sglang-mock derives
// HealthCheck and its state snapshots from it.
var serverNotServing = lossWay{"NOT_SERVING", func(t *testing.T, m *mock) {
	m.setHealth(t, "", "NOT_SERVING")
}}

// serverLivenessFails toggles the whole server's health, its readiness
// left serving; vigil's log names the failing signal as signal.
func serverLivenessFails(signal string) healthToggle {
	return healthToggle{
		signal: signal,
		fail:   func(t *testing.T, m *mock) { m.setHealth(t, "", "NOT_SERVING") },
		clear:  func(t *testing.T, m *mock) { m.setHealth(t, "", "SERVING") },
	}
}

// engine is one row of the engine table: an engine, the mock that stands
// in for it, and what the scenarios need to know of them.
type engine struct {
	// Engine names the engine for vigil and says how to build and start
	// its mock, and its adapter as an executable of its own.
	harness.Engine

	// model is the model the mock is started with; servedModel and modelID
	// are what the engine then reports (the registration's model and
	// model_id).
	model, servedModel, modelID string
	// lifetimeID: the engine reports a lifetime id, and the registration
	// carries the mock's instance id.
	lifetimeID bool
	// textPrompts: the engine takes text prompts besides token ids.
	textPrompts bool
	// seeds: the engine takes a sampling seed (SGLang's sampling
	// parameters have none).
	seeds bool
	// minP: the engine takes min_p (every engine's API now has it).
	minP bool
	// lifecycleOnly: the engine takes no requests through vigil (an older
	// API that vigil only supervises); the request scenarios skip.
	lifecycleOnly bool
	// maxModelLen is the model length the worker learns, in tokens; 0 when
	// it learns none.
	maxModelLen uint32
	// outputToken is the i-th token the mock generates for a token prompt
	// and seed; tokenText is a token's text, nil when the engine returns
	// token ids only.
	outputToken func(seed int64, prompt []uint32, i int) uint32
	tokenText   func(id uint32) string

	// unhealthy makes the running engine report itself failed, its
	// process staying up.
	unhealthy lossWay
	// livenessFails makes the running engine, alive and ready (every
	// other signal vigil checks at startup serving), report failure on
	// the signal vigil takes for loss, and clear makes it report health
	// again (vLLM: "" NOT_SERVING while "vllm.Inference" and
	// "vllm.Control" serve, then SERVING; SGLang: "" NOT_SERVING, which
	// sglang-mock's HealthCheck and state stream follow; its older API:
	// "" while the scheduler's service serves). signal is how vigil's log
	// names that signal when the startup deadline passes with it failing.
	// A nil fail when the engine has no liveness signal apart from
	// readiness.
	livenessFails healthToggle
	// lostReason begins vigil's "engine lost" reason, from the adapter.
	lostReason string
	// drains: the engine drains on purpose (POST /drain on its mock:
	// NOT_SERVING while it finishes the streams it has), and its adapter
	// reports Draining. SGLang's Python server ends its generations before
	// its grace period; TensorRT-LLM has no NOT_SERVING phase.
	drains bool
	// watchModes are the ways the mock can answer a health Watch other
	// than the engine's usual one (mock flags); the adapter must see the
	// engine's loss under each. Empty when the engine has one way.
	watchModes []mockVariant
	// pollOnly are the mocks under which vigil learns the engine's health
	// by polling alone (a health Watch that does not stream, or an
	// engine without one: then a variant without flags). An engine
	// replaced between two polls looks healthy to them; vigil must tell
	// it by its connection.
	pollOnly []mockVariant
	// notReady are the ways the engine, alive, stops taking work (sleep,
	// pause) and takes it again; empty when it has none.
	notReady []notReadyWay

	// specific are this engine's own cases: behaviour of its API that no
	// other engine has (vLLM's readiness health service, say, or an
	// engine that stays up unhealthy after a crash). TestEngineSpecific
	// runs each as TestEngineSpecific/<engine>/<case>, with the helpers
	// the other scenarios use; a case gets its row as e, for it cannot
	// refer to the table (engines, firstEngine) that refers to it. A
	// behaviour two engines share belongs in a scenario instead, with a
	// row field saying how each engine does it.
	specific []engineCase

	// mockBin and adapterBin are the built binaries, set by TestMain;
	// adapterBin is "" when the engine has no adapter executable.
	mockBin, adapterBin string
}

// lossWay is a way to lose a running engine.
type lossWay struct {
	name string
	lose func(t *testing.T, m *mock)
}

// mockVariant is a mock started with extra flags.
type mockVariant struct {
	name string
	args []string
}

// healthToggle turns one health signal of a running engine to failure and
// back, by its mock's control surface.
type healthToggle struct {
	signal      string
	fail, clear func(t *testing.T, m *mock)
}

// notReadyWay takes the engine out of service and back, by POSTs to the
// mock's control surface.
type notReadyWay struct {
	name, enter, leave string
}

// engineCase is a case of one engine alone.
type engineCase struct {
	name string
	run  func(t *testing.T, e *engine)
}

// forEachEngine runs f as a parallel subtest per row, named after the
// row.
func forEachEngine(t *testing.T, f func(t *testing.T, e *engine)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.row(), func(t *testing.T) {
			t.Parallel()
			f(t, e)
		})
	}
}

// row names the row: the engine, and its variant if any.
func (e *engine) row() string {
	if e.Variant == "" {
		return e.Name
	}
	return e.Name + "-" + e.Variant
}

// skipVariant skips a request scenario for an engine's variant (its other
// API), and for an engine that takes no requests through vigil: it runs on
// each engine's main API.
func skipVariant(t *testing.T, e *engine) {
	t.Helper()
	skipWithoutRequests(t, e)
	if e.Variant != "" {
		t.Skip("each engine's main API")
	}
}

// skipWithoutRequests skips a request scenario for an engine that takes
// none through vigil.
func skipWithoutRequests(t *testing.T, e *engine) {
	t.Helper()
	if e.lifecycleOnly {
		t.Skip("the engine takes no requests through vigil: lifecycle only")
	}
}

// firstEngine is the row the engine-independent tests run with.
func firstEngine() *engine { return engines[0] }

// instanceID is the instance id the registration carries for mock m.
func (e *engine) instanceID(m *mock) string {
	if !e.lifetimeID {
		return ""
	}
	return m.InstanceID
}

// TestEngineSpecific runs each row's cases of its engine alone.
func TestEngineSpecific(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		if len(e.specific) == 0 {
			t.Skip("no engine-specific cases")
		}
		for _, c := range e.specific {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, e)
			})
		}
	})
}

// vllmReadinessService: later vLLM releases report readiness on the
// "vllm.Inference" health service and leave "" (liveness) SERVING. Its
// NOT_SERVING withdraws the worker without a loss; SERVING again registers
// it again.
func vllmReadinessService(t *testing.T, e *engine) {
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
	c.passing(t, svc, 30*time.Second, count(1))

	m.setHealth(t, "vllm.Inference", "NOT_SERVING")
	_, gone := c.passing(t, svc, 10*time.Second, count(0))
	if d := gone.Sub(m.lastHealthChange(t)); d > registerBound {
		t.Errorf("withdrawn %s after vllm.Inference turned NOT_SERVING, want within %s", d, registerBound)
	}
	m.setHealth(t, "vllm.Inference", "SERVING")
	_, back := c.passing(t, svc, 10*time.Second, count(1))
	if d := back.Sub(m.lastHealthChange(t)); d > registerBound {
		t.Errorf("registered again %s after vllm.Inference turned SERVING, want within %s", d, registerBound)
	}
	if v.exited() {
		t.Fatalf("vigil exited with %d while the engine was alive", v.exitCode())
	}
	if l := v.findLine("engine lost"); l != "" {
		t.Errorf("vigil logged a loss for an engine that was only not ready: %s", l)
	}
}

// sglangReplacedInStream: SGLang's state stream carries the engine's
// lifetime id, and a snapshot with another instance_id on the open stream
// (a new engine process behind the same connection, as a restart behind a
// proxy looks) is a loss, though the engine is up, healthy and not paused
// and the connection stays open: the worker registered with the old id is
// withdrawn within registerBound, and vigil logs the loss at error level,
// naming both ids, and exits 1.
func sglangReplacedInStream(t *testing.T, e *engine) {
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	// A TTL far longer than the test: only vigil's own deregistration can
	// empty the catalog in time.
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--check-ttl", "5m"}})
	registeredWith(t, c, svc, e.instanceID(m))

	next := e.NewInstanceID()
	m.post(t, "/replace", map[string]string{"instance_id": next})
	_, gone := c.passing(t, svc, 10*time.Second, count(0))
	if d := gone.Sub(m.lastHealthChange(t)); d > registerBound {
		t.Errorf("withdrawn %s after the engine took instance id %s, want within %s", d, next, registerBound)
	}
	if code := v.wait(exitBound); code != 1 {
		t.Fatalf("vigil exit code = %d after the engine was replaced, want 1", code)
	}
	lost := v.findLine("engine lost")
	for _, want := range []string{"[ERROR]", e.lostReason, "replaced", next, m.InstanceID} {
		if !strings.Contains(lost, want) {
			t.Errorf("engine lost line %q does not hold %q", lost, want)
		}
	}
	if c.catalogHas(t, svc) {
		t.Errorf("worker with the old instance id %s still in Consul after vigil exited", m.InstanceID)
	}
	if m.exited() {
		t.Errorf("the engine exited (%d): the case needs it up, replaced in place", m.exitCode())
	}
}

// sglangSchedulerRefusesRequests: an older SGLang server takes no requests
// through vigil; a request to its worker is refused before any token with
// UNAVAILABLE (retry elsewhere) naming the older API, and the worker stays
// up and registered.
func sglangSchedulerRefusesRequests(t *testing.T, e *engine) {
	_, v := servingWorker(t, e, harness.MockOpts{})
	got := generate(context.Background(), workerClient(t, v.Listen), tokenPrompt("r1", 3, 1), nil)
	if status.Code(got.err) != codes.Unavailable || !strings.Contains(status.Convert(got.err).Message(), "sglang.grpc.scheduler") ||
		len(got.tokens) != 0 {
		t.Errorf("request to an older server's worker: %d tokens, err %v; want Unavailable naming sglang.grpc.scheduler", len(got.tokens), got.err)
	}
	if v.exited() {
		t.Fatalf("vigil exited with %d after a refused request", v.exitCode())
	}
}
