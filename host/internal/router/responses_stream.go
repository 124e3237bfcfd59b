package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// respStream makes the events of one streamed response, each numbered
// (sequence_number) from 0; out builds its items and sends theirs.
type respStream struct {
	events sse
	resp   *responseJSON
	out    *respOutput
	seq    int
}

// send writes one event: SSE's event line with its type, and the data
// line with fields, type and sequence_number added.
func (s *respStream) send(typ string, fields map[string]any) error {
	fields["type"], fields["sequence_number"] = typ, s.seq
	s.seq++
	data, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.Grow(len(data) + len(typ) + 16)
	buf.WriteString("event: " + typ + "\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	if _, err := s.events.w.Write(buf.Bytes()); err != nil {
		return err
	}
	return s.events.rc.Flush()
}

// open sends the events before the first item's: the response created
// and in progress.
func (s *respStream) open() error {
	if err := s.send("response.created", map[string]any{"response": s.resp}); err != nil {
		return err
	}
	return s.send("response.in_progress", map[string]any{"response": s.resp})
}

// relay sends the events of m, a message of the run's stream.
func (s *respStream) relay(run *promptRun, m *workerv1.GenerateResponse) error {
	run.collect(m)
	return s.out.add(m.GetChunk())
}

// close sends the events after the last chunk: the open item done, and
// the response completed (or incomplete).
func (s *respStream) close(run *promptRun) {
	if s.resp.finish(s.out, run.final) != nil {
		return // the client is gone
	}
	end := "response.completed"
	if s.resp.Status == "incomplete" {
		end = "response.incomplete"
	}
	s.send(end, map[string]any{"response": s.resp})
}

// streamResponse answers a streamed Responses request with the Responses
// API's events. As chat's stream, the status line goes with the first
// message (or heartbeat), so a request that fails before either gets its
// error status; a failure after it is an error event, then
// response.failed once the response was created.
func (h *httpHandler) streamResponse(w http.ResponseWriter, r *http.Request, p *parsed, c *responsesRequest, id string, run *promptRun) {
	events := newSSE(w)
	s := &respStream{events: events, resp: c.newResponse(id, p.model, time.Now().Unix())}
	s.out = &respOutput{emit: s.send}
	hb := h.startHeartbeat(events, id)
	started := false
	first := runAll(r.Context(), []*promptRun{run}, func(ctx context.Context, _ int, run *promptRun) error {
		return h.proxy.generate(ctx, run.req, run.extra, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
			if !started {
				started = true
				if s.resp.Model == "" {
					s.resp.Model = ep.Model
				}
				if !hb.stop() {
					events.begin()
				}
				if err := s.open(); err != nil {
					return err
				}
			}
			return s.relay(run, m)
		})
	})
	committed := hb.stop()
	aerr := failure(first, p.names)
	if !started && !committed {
		h.fail(w, r, id, aerr)
		return
	}
	if aerr != nil {
		h.responseFailed(s, r, id, aerr, started)
		return
	}
	s.close(run)
}

// responseFailed ends a committed stream that failed: OpenAI's error
// event (before the first message, with the error the status would have
// had), then, once the response was created, response.failed.
func (h *httpHandler) responseFailed(s *respStream, r *http.Request, id string, e *apiError, started bool) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		h.log.Info("request cancelled by the client", "request_id", id, "path", r.URL.Path, "remote", r.RemoteAddr)
		return
	}
	h.log.Warn("stream failed", "request_id", id, "path", r.URL.Path, "error", e.msg, "first_token", started)
	code, param := "server_error", any(nil)
	if !started {
		code = e.typ
		if e.code != "" {
			code = e.code
		}
		if e.param != "" {
			param = e.param
		}
	}
	if s.send("error", map[string]any{"code": code, "message": e.msg, "param": param}) != nil || !started {
		return
	}
	s.resp.Status, s.resp.Error = "failed", &respErrorJSON{Code: code, Message: e.msg}
	s.send("response.failed", map[string]any{"response": s.resp})
}
