package enginemock

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPostHealth(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		body      string
		wantCode  int
		wantError string // prefix: the field named
		signal    string
		want      Status
	}{
		"liveness not serving": {body: `{"service": "", "status": "NOT_SERVING"}`, wantCode: 200, signal: "", want: notServing},
		"service omitted":      {body: `{"status": "NOT_SERVING"}`, wantCode: 200, signal: "", want: notServing},
		"readiness unknown":    {body: `{"service": "ready", "status": "SERVICE_UNKNOWN"}`, wantCode: 200, signal: "ready", want: unknownSvc},
		"new signal":           {body: `{"service": "other", "status": "SERVING"}`, wantCode: 200, signal: "other", want: serving},
		"unknown status":       {body: `{"service": "", "status": "DOWN"}`, wantCode: 400, wantError: "status"},
		"zero status":          {body: `{"service": "", "status": "UNKNOWN"}`, wantCode: 400, wantError: "status"},
		"missing status":       {body: `{"service": ""}`, wantCode: 400, wantError: "status"},
		"status of wrong type": {body: `{"status": 1}`, wantCode: 400, wantError: "status"},
		"unknown field":        {body: `{"status": "SERVING", "colour": "red"}`, wantCode: 400, wantError: "colour"},
		"empty body":           {body: ``, wantCode: 400, wantError: "body"},
		"not an object":        {body: `[]`, wantCode: 400, wantError: "body"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, Config{Signals: []string{"", "ready"}})
			before := e.State().LastHealthChangeUnixNano
			code, body := do(t, e, http.MethodPost, "/health", tt.body)
			if code != tt.wantCode {
				t.Fatalf("POST /health %s = %d %v, want %d", tt.body, code, body, tt.wantCode)
			}
			if tt.wantCode != 200 {
				if msg, _ := body["error"].(string); !strings.HasPrefix(msg, tt.wantError+":") {
					t.Errorf("error = %q, want it to start with %q", msg, tt.wantError+":")
				}
				return
			}
			if got := e.Status(tt.signal); got != tt.want {
				t.Errorf("Status(%q) = %v, want %v", tt.signal, got, tt.want)
			}
			if got := body["health"].(map[string]any)[tt.signal]; got != tt.want.String() {
				t.Errorf("answer's health[%q] = %v, want %v", tt.signal, got, tt.want)
			}
			if after := e.State().LastHealthChangeUnixNano; after <= before {
				t.Errorf("last_health_change_unix_nano = %d, want after %d", after, before)
			}
		})
	}
}

// TestPinSticks: a pinned signal ignores the engine's rule until stop.
func TestPinSticks(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{Signals: []string{"live", "ready"}, Health: readiness})
	must(t, e, "/sleep", "")
	must(t, e, "/health", `{"service": "ready", "status": "NOT_SERVING"}`)
	must(t, e, "/wake", "")
	if got := e.Status("ready"); got != notServing {
		t.Errorf("Status(ready) after wake = %v, want the NOT_SERVING pinned", got)
	}
	must(t, e, "/health", `{"service": "live", "status": "SERVING"}`)
	must(t, e, "/pause", "")
	must(t, e, "/resume", "")
	if s := e.State(); s.Sleeping || s.Paused {
		t.Errorf("State after wake and resume: sleeping %v, paused %v; want neither", s.Sleeping, s.Paused)
	}
}

func TestControlSurfaceErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		method, path, body string
		wantCode           int
		wantError          string
	}{
		"unknown path":       {"POST", "/nope", "", 404, "no endpoint"},
		"wrong method":       {"GET", "/sleep", "", 405, "GET /sleep"},
		"state by POST":      {"POST", "/state", "", 405, "POST /state"},
		"hold without at":    {"POST", "/hold", `{}`, 400, "at_token:"},
		"hold negative":      {"POST", "/hold", `{"at_token": -1}`, 400, "at_token:"},
		"hold too far":       {"POST", "/hold", `{"at_token": 4294967296}`, 400, "at_token:"},
		"hold at as string":  {"POST", "/hold", `{"at_token": "3"}`, 400, "at_token:"},
		"fail unknown code":  {"POST", "/fail", `{"at_token": 1, "code": "NOPE"}`, 400, "code:"},
		"fail OK code":       {"POST", "/fail", `{"at_token": 1, "code": "OK"}`, 400, "code:"},
		"fail without code":  {"POST", "/fail", `{"at_token": 1}`, 400, "code:"},
		"fail without at":    {"POST", "/fail", `{"code": "INTERNAL"}`, 400, "at_token:"},
		"latency missing":    {"POST", "/check-latency", `{}`, 400, "latency: required"},
		"latency negative":   {"POST", "/check-latency", `{"latency": "-1s"}`, 400, "latency:"},
		"latency unparsed":   {"POST", "/check-latency", `{"latency": "soon"}`, 400, "latency:"},
		"script and scripts": {"POST", "/script", `{"tokens": [1], "scripts": [{"tokens": [2]}]}`, 400, "scripts:"},
		"eos and scripts":    {"POST", "/script", `{"eos": true, "scripts": []}`, 400, "scripts:"},
		"scripts not a list": {"POST", "/script", `{"scripts": {"tokens": [2]}}`, 400, "scripts:"},
		"script tokens text": {"POST", "/script", `{"scripts": [{"tokens": "a"}]}`, 400, "scripts.tokens:"},
		"script unknown key": {"POST", "/script", `{"scripts": [{"token": [2]}]}`, 400, "token: unknown field"},
	}
	e := newEngine(t, Config{})
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, body := do(t, e, tt.method, tt.path, tt.body)
			msg, _ := body["error"].(string)
			if code != tt.wantCode || !strings.HasPrefix(msg, tt.wantError) {
				t.Errorf("%s %s %s = %d %q, want %d and an error starting %q", tt.method, tt.path, tt.body, code, msg, tt.wantCode, tt.wantError)
			}
		})
	}
}

// TestPostStop: /stop answers with every signal down, then Serve returns
// nil; pins are refused from then on.
func TestPostStop(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{Signals: []string{"", "ready"}})
	_, served := serve(t, e)
	code, body := do(t, e, http.MethodPost, "/stop", "")
	want := map[string]any{"": "NOT_SERVING", "ready": "NOT_SERVING"}
	if code != http.StatusOK {
		t.Errorf("POST /stop = %d %v, want 200", code, body)
	}
	if diff := cmp.Diff(want, body["health"]); diff != "" {
		t.Errorf("POST /stop health (-want +got):\n%s", diff)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve() after /stop = %v, want nil", err)
	}
	if code, _ := do(t, e, http.MethodPost, "/health", `{"status": "SERVING"}`); code != http.StatusConflict {
		t.Errorf("POST /health after /stop = %d, want 409", code)
	}
}

// TestPostReplace: /replace gives the engine a new lifetime id, the one
// named or a fresh one, and Publish hears of it; after stop it is refused.
func TestPostReplace(t *testing.T) {
	t.Parallel()
	var p published
	e := newEngine(t, Config{InstanceID: "old", Signals: []string{""}, Publish: p.publish})
	p.take()
	before := e.State().LastHealthChangeUnixNano

	must(t, e, "/replace", `{"instance_id": "new"}`)
	if got := e.InstanceID(); got != "new" {
		t.Errorf("InstanceID() after /replace = %q, want new", got)
	}
	if got := p.take(); len(got) != 1 || got[0].InstanceID != "new" || len(got[0].Changed) != 0 {
		t.Errorf("Publish heard %+v, want one change with instance id new and no signal changed", got)
	}
	if after := e.State().LastHealthChangeUnixNano; after <= before {
		t.Errorf("last_health_change_unix_nano = %d, want after %d", after, before)
	}
	must(t, e, "/replace", "")
	if got := e.State().InstanceID; got == "new" || len(got) != 16 {
		t.Errorf("instance id after /replace without a body = %q, want a fresh 16-character id", got)
	}
	must(t, e, "/stop", "")
	if code, _ := do(t, e, http.MethodPost, "/replace", ""); code != http.StatusConflict {
		t.Errorf("POST /replace after /stop = %d, want 409", code)
	}
}

// TestControlRoutes: an engine's own routes answer like the kit's, and
// cannot replace them.
func TestControlRoutes(t *testing.T) {
	t.Parallel()
	var got string
	e := newEngine(t, Config{Control: map[string]func(*http.Request) error{
		"/mode": func(r *http.Request) error {
			var body struct {
				Mode string `json:"mode"`
			}
			if err := Decode(r, &body); err != nil {
				return err
			}
			got = body.Mode
			return nil
		},
		"/sleep": func(*http.Request) error { t.Error("an engine route replaced /sleep"); return nil },
	}})
	must(t, e, "/mode", `{"mode": "hang"}`)
	if got != "hang" {
		t.Errorf("route saw mode %q, want hang", got)
	}
	if code, body := do(t, e, http.MethodPost, "/mode", `{"colour": 1}`); code != http.StatusBadRequest || !strings.HasPrefix(body["error"].(string), "colour:") {
		t.Errorf("POST /mode with an unknown field = %d %v, want 400 naming colour", code, body)
	}
	if code, _ := do(t, e, http.MethodGet, "/mode", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /mode = %d, want 405", code)
	}
	must(t, e, "/sleep", "")
	if !e.State().Sleeping {
		t.Error("POST /sleep did not sleep: the kit's route must win")
	}
}

// TestCheckLatency: POST /check-latency delays CheckDelay, within its ctx,
// and "0" undoes it.
func TestCheckLatency(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	must(t, e, "/check-latency", `{"latency": "1h"}`)
	if got := e.State().CheckLatency; got != "1h0m0s" {
		t.Errorf("State().CheckLatency = %q, want 1h0m0s", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := e.CheckDelay(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CheckDelay() with 1h latency = %v, want its ctx's deadline", err)
	}
	must(t, e, "/check-latency", `{"latency": "0"}`)
	if err := e.CheckDelay(t.Context()); err != nil {
		t.Errorf("CheckDelay() after latency 0 = %v, want nil at once", err)
	}
}

// TestPostScriptSeq: POST /script {"scripts": [...]} queues one script per
// new stream, the last for the rest; "scripts": [] undoes.
func TestPostScriptSeq(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	must(t, e, "/script", `{"scripts": [{"tokens": [7, 8], "eos": true}, {"tokens": [9]}]}`)
	want := []output{{[]uint32{7, 8}, FinishStop}, {[]uint32{9}, FinishLength}, {[]uint32{9}, FinishLength}}
	if diff := cmp.Diff(want, outputs(t, e, 3)); diff != "" {
		t.Errorf("after POST /script scripts (-want +got):\n%s", diff)
	}
	must(t, e, "/script", `{"scripts": []}`)
	want = []output{{seq(0, []uint32{1, 2}, 10), FinishLength}}
	if diff := cmp.Diff(want, outputs(t, e, 1)); diff != "" {
		t.Errorf("after POST /script with no scripts (-want +got):\n%s", diff)
	}
}
