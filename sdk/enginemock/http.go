package enginemock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Handler is the JSON control surface. Every successful request answers 200
// with the State after it; errors answer {"error": "..."}: 400 for bad input
// naming the field, 404 for an unknown path, 405 for the wrong method, 409
// for POST /health or /replace after stop.
//
//	POST /health  {"service": "", "status": "NOT_SERVING"}  pin a health signal (SERVING, NOT_SERVING, SERVICE_UNKNOWN)
//	POST /sleep, /wake, /pause, /resume                   SetSleeping or SetPaused; in-flight requests run on
//	POST /drain                                           SetDraining: health as the engine drains on purpose; gRPC and streams in flight run on
//	POST /stop                                            all NOT_SERVING, then stop gRPC; Serve returns nil
//	POST /replace {"instance_id": "x"}                    Replace: a new lifetime id, "x" or random without a body
//	POST /hold    {"at_token": N}                         hold every new stream before output token N
//	POST /release                                         release held streams
//	POST /fail    {"at_token": N, "code": "UNAVAILABLE"}  fail the next stream with code after N tokens ("every": true: every new stream, until the next /fail)
//	POST /script  {"tokens": [N, ...]}                    every new stream outputs these tokens, then ends (Script; [] undoes; "eos": true ends with stop, ScriptEOS)
//	POST /script  {"scripts": [{"tokens": [N, ...], "eos": true}, ...]}  each new stream takes the next script, the last stays for all later ones (ScriptSeq; [] undoes)
//	POST /check-latency {"latency": "2s"}                  every health check answers this late, the transport at once (SetCheckLatency; "0" undoes)
//	GET  /state                                           the State
//
// A status set through /health sticks: the engine changes it again only on
// stop. A signal the engine lacks is added. Config.Control adds the
// engine's own routes.
func (e *Engine) Handler() http.Handler {
	type route struct {
		method string
		do     func(*http.Request) error
	}
	set := func(f func(bool), on bool) func(*http.Request) error {
		return func(*http.Request) error { f(on); return nil }
	}
	routes := map[string]route{
		"/health":        {http.MethodPost, e.postHealth},
		"/sleep":         {http.MethodPost, set(e.SetSleeping, true)},
		"/wake":          {http.MethodPost, set(e.SetSleeping, false)},
		"/pause":         {http.MethodPost, set(e.SetPaused, true)},
		"/resume":        {http.MethodPost, set(e.SetPaused, false)},
		"/drain":         {http.MethodPost, set(e.SetDraining, true)},
		"/stop":          {http.MethodPost, func(*http.Request) error { e.shutdown(); return nil }},
		"/replace":       {http.MethodPost, e.postReplace},
		"/hold":          {http.MethodPost, e.postHold},
		"/release":       {http.MethodPost, e.postRelease},
		"/fail":          {http.MethodPost, e.postFail},
		"/script":        {http.MethodPost, e.postScript},
		"/check-latency": {http.MethodPost, e.postCheckLatency},
		"/state":         {http.MethodGet, func(*http.Request) error { return nil }},
	}
	for path, do := range e.cfg.Control {
		if _, ok := routes[path]; !ok {
			routes[path] = route{http.MethodPost, do}
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := routes[r.URL.Path]
		if !ok {
			writeJSON(w, http.StatusNotFound, errorBody{fmt.Sprintf("no endpoint %s", r.URL.Path)})
			return
		}
		if r.Method != rt.method {
			w.Header().Set("Allow", rt.method)
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{fmt.Sprintf("%s %s: want %s", r.Method, r.URL.Path, rt.method)})
			return
		}
		if err := rt.do(r); err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, errStopped) {
				code = http.StatusConflict
			}
			writeJSON(w, code, errorBody{err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, e.State())
		if r.URL.Path == "/stop" {
			// Answer before the gRPC server goes away.
			_ = http.NewResponseController(w).Flush()
			go e.Stop()
		}
	})
}

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (e *Engine) postHealth(r *http.Request) error {
	var body struct {
		Service string  `json:"service"`
		Status  *string `json:"status"`
	}
	if err := Decode(r, &body); err != nil {
		return err
	}
	if body.Status == nil {
		return errors.New("status: required, one of SERVING, NOT_SERVING, SERVICE_UNKNOWN")
	}
	st, ok := healthpb.HealthCheckResponse_ServingStatus_value[*body.Status]
	if !ok || st == int32(healthpb.HealthCheckResponse_UNKNOWN) {
		return fmt.Errorf("status: unknown status %q, want SERVING, NOT_SERVING or SERVICE_UNKNOWN", *body.Status)
	}
	return e.pin(body.Service, Status(st))
}

func (e *Engine) postReplace(r *http.Request) error {
	var body struct {
		InstanceID string `json:"instance_id"`
	}
	if r.ContentLength != 0 {
		if err := Decode(r, &body); err != nil {
			return err
		}
	}
	return e.Replace(body.InstanceID)
}

func (e *Engine) postHold(r *http.Request) error {
	var body struct {
		AtToken *int64 `json:"at_token"`
	}
	if err := Decode(r, &body); err != nil {
		return err
	}
	at, err := atToken(body.AtToken)
	if err != nil {
		return err
	}
	e.Hold(at)
	return nil
}

func (e *Engine) postRelease(*http.Request) error {
	e.Release()
	return nil
}

func (e *Engine) postScript(r *http.Request) error {
	var body struct {
		Tokens  []uint32 `json:"tokens"`
		EOS     bool     `json:"eos"`
		Scripts []Script `json:"scripts"`
	}
	if err := Decode(r, &body); err != nil {
		return err
	}
	if body.Scripts == nil {
		e.ScriptSeq(Script{Tokens: body.Tokens, EOS: body.EOS})
		return nil
	}
	if body.Tokens != nil || body.EOS {
		return errors.New("scripts: want either scripts or tokens and eos, not both")
	}
	e.ScriptSeq(body.Scripts...)
	return nil
}

func (e *Engine) postFail(r *http.Request) error {
	var body struct {
		AtToken *int64  `json:"at_token"`
		Code    *string `json:"code"`
		Every   bool    `json:"every"`
	}
	if err := Decode(r, &body); err != nil {
		return err
	}
	at, err := atToken(body.AtToken)
	if err != nil {
		return err
	}
	if body.Code == nil {
		return errors.New("code: required, a gRPC code name such as UNAVAILABLE")
	}
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(strconv.Quote(*body.Code))); err != nil || c == codes.OK {
		return fmt.Errorf("code: unknown gRPC error code %q, want a name such as UNAVAILABLE or INTERNAL", *body.Code)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail = &fail{at: at, code: c, every: body.Every}
	return nil
}

func atToken(v *int64) (uint32, error) {
	switch {
	case v == nil:
		return 0, errors.New("at_token: required, a token count from 0")
	case *v < 0 || *v > math.MaxUint32:
		return 0, fmt.Errorf("at_token: %d out of range, want 0 to %d", *v, uint32(math.MaxUint32))
	}
	return uint32(*v), nil
}

// Decode reads a control request's body, one JSON object, into v for a
// Config.Control route: unknown fields are refused, and errors name the
// field at fault, as the kit's own routes answer.
func Decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return errors.New("body: want a JSON object")
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s: got a JSON %s, want %s", te.Field, te.Value, te.Type)
	}
	// encoding/json has no typed error for unknown fields.
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if name, err := strconv.Unquote(f); err == nil {
			return fmt.Errorf("%s: unknown field", name)
		}
	}
	return fmt.Errorf("body: %w", err)
}
